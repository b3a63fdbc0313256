"""The derived indexes on disk: ``state/index.sqlite3`` (SQLite, WAL, never fsync'd on a call).

Derived state, rebuilt from the chain: the chain's two fsyncs per call are the
durable copy, so the database runs with ``synchronous = NORMAL`` in WAL mode
(a commit writes the WAL and returns; only a checkpoint, every thousand pages
or so, syncs, and a resident process runs those on a thread of their own:
``ledger.edges.files.walcheckpoints``). After a crash it is consistent but may
lag; after a power loss it may lose its newest commits, which the state file's ``seq`` catches.

Tables, each row MAC'd (HMAC-SHA256 under ``keys/state-mac.key``, over its
table, its key columns and its values), so an edited row is found when read:

- ``keys``: idempotency keys and served request ids → the first entry sealed
  with them (the hot part, ``chain.idempotency_days`` long);
- ``cold_keys``: keys that left the hot part, as a keyed 64-bit tag → the
  entry's position only; a lookup that finds a tag reads that entry from the
  chain and compares the key itself (slow, never wrong);
- ``refs``: every entry hash → its position (segment, line, byte offset);
- ``counters``: budgets' per-value counters, each row with its value at the
  last save and the one before it (``seq``, ``prior_seq``), so a state file
  that lags the database by a save reads the counter as it was then;
- ``meta``: ``seq``, the number of the newest save, and ``floor``, the oldest
  state ``seq`` the counters can still answer for.

Every write is one immediate transaction, under the chain lock.
"""

import contextlib
import hashlib
import hmac
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledger.edges.files.indexconn import MMAP_BYTES, connect, forget
from ledger.edges.files.indexrows import (
    COLUMNS,
    HASH_BYTES,
    HEAD,
    SEGMENT_BYTES,
    TAG_BYTES,
    CountersBehindError,
    Position,
    RefMatch,
    cold_key,
    counter_at,
    counter_key,
    damaged,
    mac_part,
    read_meta,
)
from ledger.edges.files.indextx import IndexTx
from ledger.errors import ChainIOError, StateMismatchError

__all__ = ["CountersBehindError", "IndexDb", "IndexTx", "Position", "RefMatch", "counter_key"]


def _failure(exc: sqlite3.Error, what: str) -> StateMismatchError:
    return StateMismatchError(f"the derived index is unreadable ({what}): {exc}")


class IndexDb:
    """The derived indexes of one home."""

    def __init__(self, path: Path, mac_key: bytes) -> None:
        self.path = os.fspath(path)
        self.key = mac_key
        # The key's inner and outer states, worked out once: each row's MAC copies them.
        self._keyed = hmac.new(mac_key, digestmod=hashlib.sha256)

    def mac(self, *parts: object) -> bytes:
        """The MAC of a row's parts (HMAC-SHA256 under the home's derived-state key)."""
        mac = self._keyed.copy()
        mac.update("\x00".join(mac_part(part) for part in parts).encode())
        return mac.digest()

    def check(self, mac: bytes, *parts: object) -> None:
        """Raise ``StateMismatchError`` unless ``mac`` is the parts' MAC."""
        if not hmac.compare_digest(self.mac(*parts), bytes(mac)):
            raise damaged(str(parts[0]), "does not match its MAC (edited?)")

    def tag(self, key: str) -> int:
        """A key's tag in the cold table: keyed, so nobody without the MAC key can aim one."""
        digest = hmac.new(self.key, b"cold\x00" + key.encode(), hashlib.sha256).digest()
        return int.from_bytes(digest[:TAG_BYTES], "big")

    # Linked rows (see ``indexconn``).

    def row_mac(
        self, table: str, k: bytes, following: bytes | None, values: tuple[Any, ...]
    ) -> bytes:
        """A linked row's MAC: its table, key, the next row's key, its values."""
        return self.mac(table, k, following, *values)

    def rows_between(
        self, db: sqlite3.Connection, table: str, low: bytes, high: bytes
    ) -> list[tuple[bytes, tuple[Any, ...]]]:
        """Every row with ``low <= k <= high``, shown complete by the links around them.

        Raises:
            StateMismatchError: a row fails its MAC, or one is missing or added.
        """
        columns = ", ".join(COLUMNS[table])
        before = db.execute(
            f"SELECT k, next, {columns}, mac FROM {table} WHERE k < ?"  # noqa: S608
            " ORDER BY k DESC LIMIT 1",
            (low,),
        ).fetchone()
        rows = db.execute(
            f"SELECT k, next, {columns}, mac FROM {table}"  # noqa: S608 - fixed names
            " WHERE k BETWEEN ? AND ? ORDER BY k",
            (low, high),
        ).fetchall()
        if before is None:
            if low == HEAD and rows:
                before, rows = rows[0], rows[1:]  # the head itself is asked for
            elif read_meta(self.check, db)[0] == 0 and not rows:
                return []  # nothing was ever written
            else:
                raise damaged(table, "is missing (the head of its table)")
        found = []
        expected = self.linked(table, before)
        for row in rows:
            if bytes(row[0]) != expected:
                raise damaged(table, "is missing or was added")
            expected = self.linked(table, row)
            found.append((bytes(row[0]), tuple(row[2:-1])))
        if expected is not None and expected <= high:
            raise damaged(table, "is missing")
        return found

    def linked(self, table: str, row: Any) -> bytes | None:
        """The row's ``next``, once its MAC is checked."""
        k, following, *values, mac = row
        following = None if following is None else bytes(following)
        self.check(mac, table, bytes(k), following, *values)
        return following

    def locate(
        self, db: sqlite3.Connection, table: str, k: bytes
    ) -> tuple[tuple[Any, ...] | None, tuple[bytes, bytes | None, tuple[Any, ...]] | None]:
        """Row ``k``'s values (``None``: absent, shown by the row before it) and that row.

        One query: the row itself, or the one just before ``k``, whose ``next``
        must lie beyond ``k``. The second part is ``(key, next, values)`` of the
        row before ``k`` when ``k`` is absent, else ``None``.

        Raises:
            StateMismatchError: a row fails its MAC, or one is missing or added.
        """
        columns = ", ".join(COLUMNS[table])
        row = db.execute(
            f"SELECT k, next, {columns}, mac FROM {table} WHERE k <= ?"  # noqa: S608
            " ORDER BY k DESC LIMIT 1",
            (k,),
        ).fetchone()
        if row is None:
            if (
                read_meta(self.check, db)[0] == 0
                and db.execute(
                    f"SELECT 1 FROM {table} LIMIT 1"  # noqa: S608 - fixed names
                ).fetchone()
                is None
            ):
                return None, None  # nothing was ever written
            raise damaged(table, "is missing (the head of its table)")
        following = self.linked(table, row)
        if bytes(row[0]) == k:
            return tuple(row[2:-1]), None
        if following is not None and following <= k:
            raise damaged(table, "is missing")
        return None, (bytes(row[0]), following, tuple(row[2:-1]))

    def row(self, db: sqlite3.Connection, table: str, k: bytes) -> tuple[Any, ...] | None:
        """Row ``k``'s values (its absence shown by the row before it), or ``None``."""
        return self.locate(db, table, k)[0]

    @contextlib.contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        try:
            shared = connect(self.path)
            with shared.lock:
                yield shared.connection
        except sqlite3.Error as exc:
            raise _failure(exc, what) from exc

    def unmapped(self) -> None:
        """Read the file through ``read()`` from now on in this process, not mapped.

        A fold from line 1 touches every page once: pages mapped would count in
        the memory the process holds, growing with the chain. A lookup without
        them costs a few system calls more.

        Raises:
            ChainIOError: the index cannot be opened.
        """
        try:
            shared = connect(self.path)
            with shared.lock:
                shared.connection.execute("PRAGMA mmap_size = 0")
        except sqlite3.Error as exc:
            raise ChainIOError(f"cannot open the derived index: {exc}") from exc

    @contextlib.contextmanager
    def writing(self) -> Iterator["IndexTx"]:
        """One write transaction (commits when the block ends without an error).

        Raises:
            ChainIOError: the database cannot be written.
            StateMismatchError: a row it had to change is damaged.
        """
        try:
            shared = connect(self.path)
        except sqlite3.Error as exc:
            raise ChainIOError(f"cannot open the derived index: {exc}") from exc
        with shared.lock:
            db = shared.connection
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise ChainIOError(f"cannot write the derived index: {exc}") from exc
            try:
                tx = IndexTx(self, db)
                if not shared.heads:
                    tx.ensure_heads()
                    shared.heads = True
                yield tx
                db.execute("COMMIT")
                shared.commits += 1
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise ChainIOError(f"cannot write the derived index: {exc}") from exc
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise

    def meta(self) -> tuple[int, int]:
        """``(seq, floor)``: the newest save's number, the oldest state seq counters answer for.

        Raises:
            StateMismatchError: the database is unreadable or a meta row was edited.
        """
        with self._reading("meta") as db:
            return read_meta(self.check, db)

    def find_key(self, key: str) -> dict[str, Any] | list[Position] | None:
        """The hot record of ``key``; else the positions its cold tag names (maybe none).

        Raises:
            StateMismatchError: the database is unreadable, or a row was edited or removed.
        """
        with self._reading("keys") as db:
            hot = self.row(db, "keys", key.encode())
            if hot is not None:
                record: dict[str, Any] = json.loads(hot[1])
                return record
            tag = self.tag(key)
            low = cold_key(tag)
            cold = self.rows_between(db, "cold_keys", low, low[:TAG_BYTES] + b"\xff" * len(low))
        positions = [
            Position(
                int.from_bytes(k[TAG_BYTES : TAG_BYTES + SEGMENT_BYTES], "big"),
                int.from_bytes(k[TAG_BYTES + SEGMENT_BYTES :], "big"),
                values[0],
            )
            for k, values in cold
        ]
        return positions or None

    def find_refs(self, prefix: str, limit: int = 2) -> list[RefMatch]:
        """Up to ``limit`` entries whose hash begins with the hex digits ``prefix``.

        Raises:
            StateMismatchError: the database is unreadable, or a row was edited or removed.
        """
        digits = HASH_BYTES * 2
        low = bytes.fromhex((prefix + "0" * digits)[:digits])
        high = bytes.fromhex((prefix + "f" * digits)[:digits])
        with self._reading("refs") as db:
            rows = self.rows_between(db, "refs", low, high)
        return [
            RefMatch(k.hex(), Position(segment, entry, offset))
            for k, (segment, entry, offset) in rows[:limit]
        ]

    def find_counter(self, budget: str, epoch: int, value: str, seq: int) -> Any:
        """A counter as the state saved at ``seq`` knows it (``None``: no counter).

        Raises:
            StateMismatchError: a row was edited or removed, or no longer knows that save.
        """
        with self._reading("counters") as db:
            row = self.row(db, "counters", counter_key(budget, epoch, value))
        return None if row is None else counter_at(budget, value, row, seq)

    def scan_counters(self, budget: str, epoch: int, seq: int) -> dict[str, Any]:
        """Every counter of one budget's epoch as the save ``seq`` knows them (``None``: gone).

        Raises:
            StateMismatchError: a row was edited or removed, or no longer knows that save.
        """
        prefix = counter_key(budget, epoch)
        with self._reading("counters") as db:
            rows = self.rows_between(db, "counters", prefix, prefix + b"\xff")
        return {
            k[len(prefix) :].decode(): counter_at(budget, k[len(prefix) :].decode(), row, seq)
            for k, row in rows
        }

    def counts(self) -> dict[str, int]:
        """How many rows each table holds, heads aside (for checks and benchmarks)."""
        with self._reading("counts") as db:
            return {
                table: db.execute(
                    f"SELECT count(*) FROM {table} WHERE k > x''"  # noqa: S608 - fixed names
                ).fetchone()[0]
                for table in COLUMNS
            }

    def check_all(self) -> None:
        """Check every row and link (``rebuild-state`` and the integrity checks; O(rows)).

        Raises:
            StateMismatchError: a row was edited, added or removed, or the database is damaged.
        """
        with self._reading("check") as db:
            read_meta(self.check, db)
            # Read through the page cache, not mapped: every page of the file
            # is read once, and mapped pages would count in the memory held.
            db.execute("PRAGMA mmap_size = 0")
            try:
                for table in COLUMNS:
                    self._check_table(db, table)
            finally:
                db.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")

    def _check_table(self, db: sqlite3.Connection, table: str) -> None:
        """Every row of ``table`` in key order, each linked to the next: read as a stream.

        A row at a time, so checking a table of a million rows holds one of them.

        Raises:
            StateMismatchError: a row fails its MAC, or one is missing or added.
        """
        columns = ", ".join(COLUMNS[table])
        rows = db.execute(
            f"SELECT k, next, {columns}, mac FROM {table} ORDER BY k"  # noqa: S608 - fixed names
        )
        expected: bytes | None = HEAD
        first = True
        for row in rows:
            if first and bytes(row[0]) != HEAD:
                raise damaged(table, "is missing (the head of its table)")
            if not first and bytes(row[0]) != expected:
                raise damaged(table, "is missing or was added")
            first = False
            expected = self.linked(table, row)
        if first:
            if read_meta(self.check, db)[0] != 0:
                raise damaged(table, "is missing (the head of its table)")
            return  # nothing was ever written
        if expected is not None:
            raise damaged(table, "is missing")

    def remove(self) -> None:
        """Remove the database (rebuilt from the chain with the state)."""
        forget(self.path)
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path + suffix)  # noqa: PTH108 - a path string
