"""The chain in PostgreSQL: the ``ChainStore`` port for fleets (SPEC §8).

A write transaction takes ``pg_advisory_xact_lock`` on the schema's chain
key, reads the head (the newest row), and inserts whole rows; its derived
state is written through the same connection, so the entry and the counters
it changes commit together or not at all. The lock is released by the
commit, the rollback, or the server when the client dies, so a killed
client leaves no partial entry and no stuck lock. There is no table lock and
no ``SERIALIZABLE`` retry: the lock makes writers take turns.

Positions are byte offsets, as in a file of the same lines: a row's
``end_pos`` is where its line would end, so the services' positions
(``Head.size``, ``iter_lines(start, end)``) mean the same on both stores.
"""

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.edges.postgres.db import PgDatabase
from ledger.edges.postgres.notify import chain_channel
from ledger.edges.postgres.reads import HEAD_SQL
from ledger.edges.postgres.segments import OpenRange
from ledger.errors import ChainIOError

if TYPE_CHECKING:
    from ledger.core.chain import ChainReport
    from ledger.core.signing import Signer
    from ledger.core.trust import TrustStore
    from ledger.edges.files.sealing import SegmentLimits


class ChainTamperedError(ChainIOError):
    """Rows of the chain were changed or removed outside an append."""


class PgHead(NamedTuple):
    """The newest row: what an append links to."""

    entry_hash: str
    ts_utc: str
    size: int
    event_type: str
    seq: int


def _read_head(db: PgDatabase) -> PgHead | None:
    """The newest row, its hash computed from its bytes (never trusted from a column).

    Raises:
        ChainTamperedError: a row was updated or deleted, or the newest row is
            not a valid entry.
        StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
    """
    cache = db.group_cache()
    if cache is not None and "head" in cache:
        # Read or appended by an earlier unit of this group, under the same hold of the lock.
        found: PgHead | None = cache["head"]
        return found
    rows = None if cache is None else cache.get("read", {}).pop(HEAD_SQL, None)
    if rows is None:
        rows = db.execute(HEAD_SQL)
    seq, end_pos, line, first_changed, changes, state_hash, state_size, state_body = rows[0][:8]
    checkpoint_entries, checkpoint_document, segment, sealed_seq, open_ts = rows[0][8:13]
    kept = cache if cache is not None else db.memo()
    if kept is not None:
        kept["segment"] = OpenRange(
            int(segment or 0), int(sealed_seq or 0), None if open_ts is None else str(open_ts)
        )
        kept["state"] = None if state_body is None else (state_hash, state_size, state_body)
        kept["checkpoint"] = (
            None
            if checkpoint_document is None
            else (int(checkpoint_entries), bytes(checkpoint_document))
        )
    if changes:
        where = "the chain was truncated" if first_changed == 0 else f"row {first_changed}"
        raise ChainTamperedError(
            f"store {db.display}: chain rows were changed outside an append ({where}); "
            "run `ledger verify-chain`, then `ledger recover`"
        )
    head = None
    if seq is not None:
        raw = bytes(line)
        try:
            parsed = parse_line(raw.rstrip(b"\n"))
        except EnvelopeFormatError as exc:
            raise ChainTamperedError(
                f"store {db.display}: the newest row is not a valid entry ({exc}); "
                "run `ledger recover`"
            ) from exc
        head = PgHead(parsed.entry_hash, parsed.ts_utc, int(end_pos), parsed.event_type, int(seq))
    if cache is not None:
        cache["head"] = head
    return head


class PgChainTx:
    """The chain while its advisory lock is held (or a read-only snapshot of it)."""

    def __init__(
        self, db: PgDatabase, *, writable: bool, limits: "SegmentLimits | None" = None
    ) -> None:
        self._db = db
        self._writable = writable
        self._limits = limits
        self._head: PgHead | None = None
        self._head_read = False

    def head(self) -> PgHead | None:
        """The newest entry, or ``None`` for an empty chain.

        Raises:
            ChainTamperedError: rows were changed outside an append.
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        if not self._head_read:
            self._head = _read_head(self._db)
            self._head_read = True
        return self._head

    def forget_head(self) -> None:
        """Read the head again on next use (the chain was replaced under this lock)."""
        self._head_read = False

    def append(self, line: bytes, *, entry_hash: str | None = None, ts_utc: str | None = None,
               event_type: str | None = None) -> None:  # fmt: skip
        """Insert one whole line as the next row (durable when the transaction commits).

        Raises:
            ChainIOError: a read-only view, a line without its newline, or the
                insert failed (then the whole transaction rolls back).
        """
        if not self._writable:
            raise ChainIOError("a read-only view of the chain cannot be appended to")
        if not line.endswith(b"\n"):
            raise ChainIOError("a chain row must hold one whole line")
        if entry_hash is None or ts_utc is None or event_type is None:
            parsed = parse_line(line[:-1])
            entry_hash, ts_utc, event_type = parsed.entry_hash, parsed.ts_utc, parsed.event_type
        head = self.head()
        seq = 1 if head is None else head.seq + 1
        end = (0 if head is None else head.size) + len(line)
        # The same statement tells the listeners (the console's live feed): a
        # notification is delivered when the transaction commits, never before.
        self._db.write(
            "WITH row AS (INSERT INTO chain (seq, end_pos, entry_hash, ts_utc, event_type, line)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING end_pos)"
            " SELECT pg_notify(%s, end_pos::text) FROM row",
            (seq, end, entry_hash, ts_utc, event_type, line, chain_channel(self._db.schema)),
        )
        self._db.appended(seq, entry_hash)
        self._head = PgHead(entry_hash, ts_utc, end, event_type, seq)
        self._head_read = True
        cache = self._db.group_cache()
        if cache is not None:
            cache["head"] = self._head

    def seal_if_due(self, signer: "Signer") -> None:
        """Seal the open range in this transaction when it reached its limit (``segments``).

        The writer calls it after each append, under the lock; it reads nothing
        the head's round trip did not already read, unless it seals.
        """
        from ledger.edges.postgres import segments

        head = self._head
        if self._limits is None or not self._writable or head is None:
            return
        kept = self._db.group_cache()
        if kept is None:
            kept = self._db.memo()
        open_now = segments.open_range(self._db, kept)
        if segments.seal_due(open_now, head.seq, head.ts_utc, self._limits):
            segments.seal(
                self._db, open_now, (head.seq, head.size, head.entry_hash, head.ts_utc), signer,
                kept,
            )  # fmt: skip


class PgChainStore:
    """The chain as rows of ``<schema>.chain``."""

    def __init__(self, db: PgDatabase, limits: "SegmentLimits | None" = None) -> None:
        self.db = db
        self.limits = limits  # when writers seal the open range (``None``: never)
        self.path = db.display  # what messages name
        self._tx: PgChainTx | None = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PgChainTx]:
        """Hold the chain's advisory lock for one read-decide-append transaction.

        Raises:
            LockTimeoutError: the lock was not granted within the timeout.
            StoreUnreachableError: the database cannot be reached or went away.
        """
        with self.db.transaction():
            self.db.lock_chain()
            tx = PgChainTx(self.db, writable=True, limits=self.limits)
            outer, self._tx = self._tx, tx
            try:
                yield tx
            finally:
                self._tx = outer

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[PgChainTx]:
        """One consistent snapshot of the chain and its state; waits for no writer."""
        with self.db.transaction(read_only=True):
            yield PgChainTx(self.db, writable=False)

    def current(self) -> PgChainTx | None:
        """The write transaction open in this process, if any."""
        return self._tx

    def head(self) -> PgHead | None:
        """The newest entry, read outside any lock."""
        return _read_head(self.db)

    def exists(self) -> bool:
        """Whether the chain has at least one row."""
        return bool(self.db.execute("SELECT EXISTS (SELECT 1 FROM chain)")[0][0])

    def iter_lines(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Lines ending after byte ``start`` and at most at ``end``, in chain order."""
        if end is None:
            rows = self.db.stream(
                "SELECT line FROM chain WHERE end_pos > %s ORDER BY seq", (start,)
            )
        else:
            rows = self.db.stream(
                "SELECT line FROM chain WHERE end_pos > %s AND end_pos <= %s ORDER BY seq",
                (start, end),
            )
        for (line,) in rows:
            yield bytes(line)

    def iter_rows(self, since: int = 0) -> Iterator[tuple[int, bytes]]:
        """``(seq, line)`` of every row after the first ``since``, in chain order."""
        for seq, line in self.db.stream(
            "SELECT seq, line FROM chain WHERE seq > %s ORDER BY seq", (since,)
        ):
            yield int(seq), bytes(line)

    def verify(
        self,
        trust: "TrustStore",
        *,
        strict: bool = False,
        allow_markers: bool = False,
        workers: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        end: int | None = None,
    ) -> "ChainReport":
        """Verify every row up to position ``end``, then hold each sealed segment to its seal.

        Read in one snapshot without the advisory lock (``verifyrows``): no
        writer waits for it. A missing row (a gap in ``seq``) is reported at
        its line: the row after it no longer links. Inside this process's
        write transaction its uncommitted rows are verified too, in this
        process alone (another connection would not see them).
        """
        from ledger.edges.postgres.verifyrows import verify_rows

        if self._tx is not None:
            workers = 1
        with self.db.transaction(read_only=self._tx is None):
            return verify_rows(
                self.db, trust, strict=strict, allow_markers=allow_markers, workers=workers,
                progress=progress, end=end,
            )  # fmt: skip

    def committed_end(self) -> int:
        """Where the committed chain ends, read without the advisory lock."""
        from ledger.edges.postgres.verifyrows import committed_end

        return committed_end(self.db)

    def hash_of_entry(self, number: int, *, allow_markers: bool = False) -> str | None:
        """The hash of the ``number``-th row's line (computed from its bytes)."""
        del allow_markers  # this product never writes markers into a table
        rows = self.db.execute(
            "SELECT line FROM chain ORDER BY seq OFFSET %s LIMIT 1", (max(0, number - 1),)
        )
        if not rows or number < 1:
            return None
        try:
            return parse_line(bytes(rows[0][0]).rstrip(b"\n")).entry_hash
        except EnvelopeFormatError:
            return None

    def read_all(self) -> bytes | None:
        """Every row's bytes in chain order, as one file would hold them (``None``: no rows)."""
        parts = [bytes(line) for line in self.iter_lines()]
        return b"".join(parts) if parts else None

    def replace_all(self, data: bytes, reason: str) -> list[tuple[int, bytes]]:
        """Make the chain hold exactly the lines of ``data`` (``ledger recover``).

        Rows that already hold the same line at the same place stay; every other
        row moves to ``evidence`` with ``reason``, and the missing lines are
        inserted. Rows leave the chain only through ``recover_chain()``, which
        also retires the stored checkpoints of entries no longer there: the
        role needs EXECUTE on it (the recover role). Run under the chain's
        advisory lock.

        Returns:
            The rows moved to evidence, as ``(seq, line)``.
        """
        lines = data.splitlines(keepends=True)
        current = list(self.iter_rows())
        keep = 0
        while keep < len(lines) and keep < len(current) and current[keep][1] == lines[keep]:
            keep += 1
        moved = current[keep:]
        self.db.execute("SELECT recover_chain(%s, %s)", (keep, reason))
        position = sum(len(line) for line in lines[:keep])
        for index, line in enumerate(lines[keep:], start=keep + 1):
            position += len(line)
            parsed = parse_line(line.rstrip(b"\n"))
            self.db.execute(
                "INSERT INTO chain (seq, end_pos, entry_hash, ts_utc, event_type, line)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (index, position, parsed.entry_hash, parsed.ts_utc, parsed.event_type, line),
            )
        if self._tx is not None:
            self._tx.forget_head()
        return moved


def limits_of(config: Any) -> "SegmentLimits":
    """When this host's writers seal the open range (``chain.segment_entries``, ``_days``)."""
    from ledger.edges.files.sealing import SegmentLimits

    return SegmentLimits(int(config.segment_entries), int(config.segment_days) or None)


def rows_to_jsonl(rows: Iterator[tuple[int, bytes]], write: Callable[[bytes], Any]) -> int:
    """Write rows' bytes as JSONL, exactly as stored; returns how many."""
    count = 0
    for _seq, line in rows:
        write(line)
        count += 1
    return count
