"""Segments of a fleet's chain: ranges of rows sealed by a checkpoint (SPEC §21).

On PostgreSQL a segment is a range of ``chain`` rows, ``first_seq`` to
``last_seq``, and the signed checkpoint of its last row. A writer seals the
open range inside the very transaction whose append made it reach
``chain.segment_entries`` entries (or ``chain.segment_days``): the decision
needs only the newest seal's ``last_seq`` and the open range's first
timestamp, which the head's own round trip already read (``reads.HEAD_SQL``),
so an append pays nothing more until the one that seals. The seal commits
with the rows it seals, or neither does; the next row links to the sealed
head as it would have anyway, so the chain stays one hash chain.

A seal's checkpoint is kept in ``segments`` only, not among the checkpoints
that ``ledger checkpoint`` writes (those also vouch for a verified tree root,
which a seal written under the lock does not compute).

Rows of ``segments`` are appended only (the same trigger as ``chain``'s).
A seal never lets a verification skip its rows: the writer that sealed them
appended the last one, it did not verify the others' signatures (and an
owner's edit past the triggers leaves no trace a reader could check). What a
seal gives a verification is its boundary: each range must end at the entry
its signed checkpoint names, and a seal past the last row means rows were cut.
"""

import datetime as dt
from typing import TYPE_CHECKING, Any, NamedTuple

from ledger.core.canonical import canonical_bytes
from ledger.core.checkpoint import Checkpoint, CheckpointError, make_checkpoint
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.snapshot import checkpoint_from_bytes
from ledger.core.timefmt import parse_ts
from ledger.errors import ChainIOError, LedgerError, StoreUnreachableError

if TYPE_CHECKING:
    from ledger.core.signing import Signer
    from ledger.edges.files.sealing import SegmentLimits
    from ledger.edges.postgres.db import PgDatabase

NEWEST_SQL = "SELECT number, last_seq FROM segments ORDER BY number DESC LIMIT 1"
LISTING_SQL = (
    "SELECT number, first_seq, last_seq, end_pos, head_hash, checkpoint FROM segments"
    " ORDER BY number"
)


class SealedRange(NamedTuple):
    """One sealed segment: its rows and the checkpoint of its last one."""

    number: int
    first_seq: int
    last_seq: int
    end_pos: int
    head_hash: str
    document: bytes

    def checkpoint(self, display: str) -> Checkpoint:
        """Its seal, parsed (signature not yet checked).

        Raises:
            CheckpointError, SnapshotFileError: the stored seal is not a checkpoint.
        """
        return checkpoint_from_bytes(self.document, f"segment {self.number}'s seal in {display}")


class OpenRange(NamedTuple):
    """The newest seal's number and last row, and the first open row's time (if any)."""

    number: int
    last_seq: int
    first_ts: str | None


def listing(db: "PgDatabase") -> list[SealedRange]:
    """Every sealed segment in order (inside the open transaction, if any)."""
    return [
        SealedRange(int(n), int(first), int(last), int(end), str(head), bytes(doc))
        for n, first, last, end, head, doc in db.execute(LISTING_SQL)
    ]


def open_range(db: "PgDatabase", kept: dict[str, Any] | None) -> OpenRange:
    """The newest seal (kept from the head's round trip when it is there, else read)."""
    if kept is not None and "segment" in kept:
        found: OpenRange = kept["segment"]
        return found
    rows = db.execute(NEWEST_SQL)
    number, last_seq = (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)
    first = db.execute("SELECT ts_utc FROM chain WHERE seq = %s", (last_seq + 1,))
    found = OpenRange(number, last_seq, str(first[0][0]) if first else None)
    if kept is not None:
        kept["segment"] = found
    return found


def seal_due(open_now: OpenRange, head_seq: int, head_ts: str, limits: "SegmentLimits") -> bool:
    """Whether the open range (after ``open_now.last_seq``, up to the head) reached a limit."""
    entries = head_seq - open_now.last_seq
    if entries <= 0:
        return False
    if entries >= limits.entries:
        return True
    if limits.days is None or open_now.first_ts is None:
        return False
    try:
        age = parse_ts(head_ts) - parse_ts(open_now.first_ts)
    except ValueError:
        return False  # an unreadable time never seals early; the count still does
    return age >= dt.timedelta(days=limits.days)


def seal(
    db: "PgDatabase",
    open_now: OpenRange,
    head: tuple[int, int, str, str],
    signer: "Signer",
    kept: dict[str, Any] | None,
) -> SealedRange | None:
    """Seal the open range up to ``head`` (seq, end_pos, hash, ts) in the open transaction.

    The chain's id is the first row's hash, computed from its bytes. ``None``:
    the seal was refused (the append stands; the next one tries again).

    Raises:
        ChainIOError: the first row is not an entry, or the insert failed.
    """
    seq, end_pos, entry_hash, ts_utc = head
    rows = db.execute("SELECT line FROM chain WHERE seq = 1")
    try:
        chain_id = parse_line(bytes(rows[0][0]).rstrip(b"\n")).entry_hash
    except (IndexError, EnvelopeFormatError) as exc:
        raise ChainIOError(f"store {db.display}: the chain's first row is not an entry") from exc
    checkpoint = make_checkpoint(signer, chain_id, seq, entry_hash, ts_utc)
    document = canonical_bytes(checkpoint.to_document()) + b"\n"
    sealed = SealedRange(open_now.number + 1, open_now.last_seq + 1, seq, end_pos, entry_hash,
                         document)  # fmt: skip
    # A seal that fails (a role not yet granted INSERT on ``segments`` after an
    # upgrade) costs the append nothing: the rows stay, unsealed, and the next
    # append tries again. Only the seal's own statement is rolled back.
    db.execute("SAVEPOINT ledger_seal")
    try:
        db.execute(
            "INSERT INTO segments (number, first_seq, last_seq, end_pos, head_hash, checkpoint)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            tuple(sealed),
        )
    except StoreUnreachableError:
        raise
    except ChainIOError:
        db.execute("ROLLBACK TO SAVEPOINT ledger_seal")
        return None
    db.execute("RELEASE SAVEPOINT ledger_seal")
    if kept is not None:
        kept["segment"] = OpenRange(sealed.number, seq, None)
    return sealed


def insert_sealed(db: "PgDatabase", sealed: list[tuple[int, int, int, str, Checkpoint]]) -> int:
    """Keep a file home's segment boundaries: ``(first_seq, last_seq, end_pos, head, seal)``.

    ``ledger store migrate`` calls it with the rows just copied, in the same
    transaction; a boundary whose seal does not name its last row is refused.

    Raises:
        ChainIOError: a seal does not fit its range.
    """
    for number, (first_seq, last_seq, end_pos, head_hash, checkpoint) in enumerate(sealed, 1):
        if checkpoint.entries != last_seq or checkpoint.head_hash != head_hash:
            raise ChainIOError(
                f"store migrate: segment {number}'s checkpoint vouches for "
                f"{checkpoint.entries} entries, not the {last_seq} it ends at"
            )
        db.execute(
            "INSERT INTO segments (number, first_seq, last_seq, end_pos, head_hash, checkpoint)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (number, first_seq, last_seq, end_pos, head_hash,
             canonical_bytes(checkpoint.to_document()) + b"\n"),
        )  # fmt: skip
    return len(sealed)


def seal_problem(sealed: SealedRange, display: str) -> tuple[Checkpoint | None, str | None]:
    """The range's seal parsed, or why it cannot be (signature checked by the caller)."""
    try:
        checkpoint = sealed.checkpoint(display)
    except (CheckpointError, LedgerError) as exc:
        return None, f"segment {sealed.number}'s seal is not a checkpoint ({exc})"
    if checkpoint.entries != sealed.last_seq or checkpoint.head_hash != sealed.head_hash:
        return None, (
            f"segment {sealed.number}'s seal vouches for {checkpoint.entries} entries, "
            f"not the {sealed.last_seq} its row says (edited?)"
        )
    return checkpoint, None
