"""Writes to the derived index: one immediate transaction, rows linked in key order.

See ``ledger.edges.files.indexdb`` for what the tables hold and why each row
names the next.
"""

import json
import sqlite3
from collections.abc import Iterable
from typing import Any, Protocol

from ledger.edges.files.indexrows import (
    COLUMNS,
    HEAD,
    HEAD_VALUES,
    Position,
    cold_key,
    counter_key,
    damaged,
    json_text,
    read_meta,
)

# Hot keys moved to the cold table per save at most: a save stays small and
# flat, and a day's keys still leave within a day of calls.
MOVED_PER_SAVE = 64
Located = tuple[tuple[Any, ...] | None, tuple[bytes, bytes | None, tuple[Any, ...]] | None]


class LinkedRows(Protocol):
    """What writing needs of the index: its MACs and its checked reads."""

    def mac(self, *parts: object) -> bytes:
        """The MAC of a row's parts."""
        ...

    def check(self, mac: bytes, *parts: object) -> None:
        """Raise unless ``mac`` is the parts' MAC."""
        ...

    def tag(self, key: str) -> int:
        """A key's cold tag."""
        ...

    def row_mac(
        self, table: str, k: bytes, following: bytes | None, values: tuple[Any, ...]
    ) -> bytes:
        """A linked row's MAC."""
        ...

    def linked(self, table: str, row: Any) -> bytes | None:
        """A row's ``next``, its MAC checked."""
        ...

    def locate(self, db: sqlite3.Connection, table: str, k: bytes) -> Located:
        """Row ``k``, or the row before it."""
        ...

    def row(self, db: sqlite3.Connection, table: str, k: bytes) -> tuple[Any, ...] | None:
        """Row ``k``'s values, its absence checked."""
        ...

    def rows_between(
        self, db: sqlite3.Connection, table: str, low: bytes, high: bytes
    ) -> list[tuple[bytes, tuple[Any, ...]]]:
        """The rows from ``low`` to ``high``, shown complete."""
        ...


class IndexTx:
    """Writes inside one transaction."""

    def __init__(self, index: LinkedRows, db: sqlite3.Connection) -> None:
        self.index = index
        self.db = db

    def ensure_heads(self) -> None:
        """Give each table its head row (a fresh database).

        Raises:
            StateMismatchError: a table has rows but no head (removed).
        """
        for table in COLUMNS:
            if self.db.execute(f"SELECT 1 FROM {table} WHERE k = x''").fetchone() is None:  # noqa: S608
                if self.db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None:  # noqa: S608
                    raise damaged(table, "is missing (the head of its table)")
                self._put_row(table, HEAD, None, HEAD_VALUES[table])

    def _put_row(
        self, table: str, k: bytes, following: bytes | None, values: tuple[Any, ...]
    ) -> None:
        names = ", ".join(COLUMNS[table])
        marks = ", ".join("?" * (len(values) + 3))
        mac = self.index.row_mac(table, k, following, values)
        self.db.execute(
            f"INSERT OR REPLACE INTO {table} (k, next, {names}, mac) VALUES ({marks})",  # noqa: S608
            (k, following, *values, mac),
        )

    def _before(self, table: str, k: bytes) -> tuple[bytes, bytes | None, tuple[Any, ...]]:
        """The row just before ``k`` (checked): its key, its ``next``, its values."""
        columns = ", ".join(COLUMNS[table])
        row = self.db.execute(
            f"SELECT k, next, {columns}, mac FROM {table} WHERE k < ?"  # noqa: S608
            " ORDER BY k DESC LIMIT 1",
            (k,),
        ).fetchone()
        if row is None:
            raise damaged(table, "is missing (the head of its table)")
        following = self.index.linked(table, row)
        return bytes(row[0]), following, tuple(row[2:-1])

    def get(self, table: str, k: bytes) -> tuple[Any, ...] | None:
        """A row's values (checked, its absence too), or ``None``."""
        return self.index.row(self.db, table, k)

    def put(self, table: str, k: bytes, values: tuple[Any, ...], *, keep: bool = False) -> bool:
        """Insert or replace the row ``k``, linked in after the row before it.

        ``keep``: a row already there stays as it is. Whether anything was written.
        """
        found, before = self.index.locate(self.db, table, k)
        if found is not None and keep:
            return False
        self._write_at(table, k, values, found, before)
        return True

    def _write_at(
        self,
        table: str,
        k: bytes,
        values: tuple[Any, ...],
        found: tuple[Any, ...] | None,
        before: tuple[bytes, bytes | None, tuple[Any, ...]] | None,
    ) -> None:
        """Write row ``k`` where ``locate`` found it (or the row before it)."""
        if found is not None:
            row = self.db.execute(
                f"SELECT next FROM {table} WHERE k = ?",  # noqa: S608 - fixed names
                (k,),
            ).fetchone()
            self._put_row(table, k, None if row[0] is None else bytes(row[0]), values)
            return
        if before is None:
            raise damaged(table, "is missing (the head of its table)")
        self._put_row(table, k, before[1], values)
        self._put_row(table, before[0], k, before[2])

    def delete_range(self, table: str, low: bytes, high: bytes) -> int:
        """Remove every row with ``low <= k <= high``, the row before them linked past them."""
        rows = self.index.rows_between(self.db, table, low, high)
        if not rows:
            return 0
        before, _following, before_values = self._before(table, low)
        last = self.db.execute(
            f"SELECT next FROM {table} WHERE k = ?",  # noqa: S608 - fixed names
            (rows[-1][0],),
        ).fetchone()[0]
        self.db.execute(f"DELETE FROM {table} WHERE k BETWEEN ? AND ?", (low, high))  # noqa: S608
        self._put_row(table, before, None if last is None else bytes(last), before_values)
        return len(rows)

    def meta(self) -> tuple[int, int]:
        """``(seq, floor)`` as this transaction sees them."""
        return read_meta(self.index.check, self.db)

    def set_meta(self, seq: int, floor: int, known: tuple[int, int] | None = None) -> None:
        """Record the newest save's number and the oldest state the counters answer for.

        ``known``: the two as this transaction read them (unchanged ones are not written).
        """
        known = self.meta() if known is None else known
        for name, value, was in (("seq", seq, known[0]), ("floor", floor, known[1])):
            if value == was and value:
                continue
            self.db.execute(
                "INSERT OR REPLACE INTO meta (name, value, mac) VALUES (?, ?, ?)",
                (name, value, self.index.mac("meta", name, value)),
            )

    def has_counters(self) -> bool:
        """Whether any counter row is kept."""
        found = self.db.execute("SELECT 1 FROM counters WHERE k > x'' LIMIT 1").fetchone()
        return found is not None

    def clear(self, tables: tuple[str, ...] = tuple(COLUMNS)) -> None:
        """Forget every row of ``tables`` (a rebuild from the whole chain follows)."""
        for table in tables:
            self.db.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed table names
            self._put_row(table, HEAD, None, HEAD_VALUES[table])

    def add_keys(self, records: Iterable[dict[str, Any]], cutoff: str | None) -> None:
        """Add key records (the first record of a key wins); older than ``cutoff``: cold."""
        for record in records:
            key, ts = record["key"], str(record.get("ts") or "")
            if cutoff is not None and ts and ts < cutoff:
                self._add_cold(key, record)
            else:
                self.put("keys", key.encode(), (ts, json_text(record)), keep=True)

    def _add_cold(self, key: str, record: dict[str, Any]) -> None:
        entry = record.get("entry")
        if not isinstance(entry, int) or entry < 1:
            return  # an entry of unknown position is not indexed; its key is in the chain
        k = cold_key(self.index.tag(key), int(record.get("segment") or 0), entry)
        self.put("cold_keys", k, (record.get("offset"),), keep=True)

    def expire_keys(self, cutoff: str) -> int:
        """Move a few hundred of the oldest keys sealed before ``cutoff`` to the cold table."""
        rows = self.db.execute(
            "SELECT k FROM keys WHERE k > x'' AND ts < ? ORDER BY ts LIMIT ?",
            (cutoff, MOVED_PER_SAVE),
        ).fetchall()
        for (k,) in rows:
            found = self.get("keys", bytes(k))
            if found is None:
                continue
            self._add_cold(bytes(k).decode(), json.loads(found[1]))
            self.delete_range("keys", bytes(k), bytes(k))
        return len(rows)

    def add_refs(self, refs: Iterable[tuple[str, Position]]) -> None:
        """Add entry hash → position rows (a hash indexed already keeps its first row)."""
        for entry_hash, where in refs:
            k = bytes.fromhex(entry_hash)
            self.put("refs", k, tuple(where), keep=True)

    def save_counters(
        self, changes: Iterable[tuple[str, int, str, Any]], loaded: int, seq: int
    ) -> None:
        """Write counters at save ``seq``, keeping each one's value at the state ``loaded``."""
        for budget, epoch, value, counter in changes:
            k = counter_key(budget, epoch, value)
            row, before = self.index.locate(self.db, "counters", k)
            prior_seq, prior = 0, None
            if row is not None:
                # The value the loaded state knows stays as the prior: a newer
                # one was written by a save whose state never reached its file.
                prior_seq, prior = (row[0], row[1]) if row[0] <= loaded else (row[2], row[3])
            text = None if counter is None else json_text(counter)
            self._write_at("counters", k, (seq, text, prior_seq, prior), row, before)

    def drop_epochs_before(self, budget: str, epoch: int) -> None:
        """Forget a budget's counters of epochs older than ``epoch`` (no state reads them)."""
        if epoch > 0:
            self.delete_range(
                "counters", counter_key(budget, 0), counter_key(budget, epoch - 1) + b"\xff"
            )
