"""The spend rollups on disk: ``state/rollups.sqlite3`` (SQLite, WAL, not fsync'd).

Derived state, rebuildable from the chain: after a crash it may lag the chain
(caught up by folding the entries after its position) or be unreadable
(dropped and rebuilt). Every row carries a MAC (HMAC-SHA256 under the home's
derived-state key, ``keys/state-mac.key``), and each UTC day's cells are
vouched for by a MAC'd summary row (their number and sums), so an edited,
added, removed or replayed cell is found when its day is read.

Tables: ``calls`` (one row per call, ``calltable``), the budget facts
(``budgetfacts``: what a budget added later is counted from), ``cells`` (a quarter
hour and a call's dimensions → its measures),
``days`` (per UTC day: cell count and sums), ``marks`` (per quarter hour: the
chain position before its first entry, where an export of a range starts
reading) and ``meta`` (the chain position the rollups reflect). One writer at
a time: a write runs in an immediate transaction, so a second writer waits
and then sees the first one's position.
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

from ledger.core.rollups import MEASURES, CellKey
from ledger.edges.fileio import exclusive_create, read_regular
from ledger.edges.files.budgetfacts import SCHEMA as BUDGET_FACTS_SCHEMA
from ledger.edges.files.budgetfacts import BudgetFactsTable
from ledger.edges.files.calltable import SCHEMA as CALLS_SCHEMA
from ledger.edges.files.calltable import CallTable
from ledger.errors import ChainIOError, LedgerError, LockTimeoutError, StateMismatchError

_SLOTS_PER_DAY = 96
_SCHEMA = """
CREATE TABLE IF NOT EXISTS cells (
    slot INTEGER NOT NULL, agent TEXT NOT NULL, session TEXT NOT NULL, key TEXT NOT NULL,
    tags TEXT NOT NULL, model TEXT NOT NULL, provider TEXT NOT NULL, client TEXT NOT NULL,
    measures TEXT NOT NULL, mac TEXT NOT NULL,
    PRIMARY KEY (slot, agent, session, key, tags, model, provider, client)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS days (day INTEGER PRIMARY KEY, summary TEXT NOT NULL, mac TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS marks (slot INTEGER PRIMARY KEY, mark TEXT NOT NULL, mac TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL,
    mac TEXT NOT NULL);
"""
_CELL_COLUMNS = "slot, agent, session, key, tags, model, provider, client"


def _failure(exc: sqlite3.Error) -> LedgerError:
    """A busy database is a lock timeout (another reader is catching up); else damage."""
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return LockTimeoutError(
            "the rollups stayed busy (another report is catching them up); try again"
        )
    return StateMismatchError(f"rollups unreadable: {exc}")


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class RollupWriter:
    """One write transaction: read the position, add cells and marks, save the position."""

    def __init__(self, db: sqlite3.Connection, key: bytes) -> None:
        self.db, self.key = db, key
        self.calls = CallTable(db, key)
        self.budget_facts = BudgetFactsTable(db, key)

    def _mac(self, label: str, body: str) -> str:
        return hmac.new(self.key, f"{label}\n{body}".encode(), hashlib.sha256).hexdigest()

    def _checked(self, label: str, body: str, mac: str) -> Any:
        if not hmac.compare_digest(self._mac(label, body), mac):
            raise StateMismatchError(f"rollups: a {label} row does not match its MAC (edited?)")
        return json.loads(body)

    def position(self) -> dict[str, Any] | None:
        """The saved position (``entries``, ``size``, ``head_hash``, …), or ``None``."""
        row = self.db.execute("SELECT body, mac FROM meta WHERE id = 1").fetchone()
        return None if row is None else dict(self._checked("meta", row[0], row[1]))

    def clear(self) -> None:
        """Forget every row (before a fold from the first entry)."""
        for table in ("cells", "days", "marks", "meta"):
            self.db.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed table names
        self.calls.clear()
        self.budget_facts.clear()

    def add(self, cells: dict[CellKey, list[int]], marks: dict[int, list[Any]]) -> None:
        """Add folded cells (summed into what is stored) and the first marks of new slots."""
        days: dict[int, list[int]] = {}
        for key, measures in cells.items():
            where = " AND ".join(f"{name} = ?" for name in _CELL_COLUMNS.split(", "))
            row = self.db.execute(
                f"SELECT measures, mac FROM cells WHERE {where}",  # noqa: S608 - fixed columns
                key,
            ).fetchone()
            old = [0] * len(MEASURES)
            new_cell = row is None
            if row is not None:
                old = self._checked("cell", _json([*key, row[0]]), row[1])[-1]
                old = json.loads(old)
            total = [a + b for a, b in zip(old, measures, strict=True)]
            text = _json(total)
            self.db.execute(
                f"INSERT OR REPLACE INTO cells ({_CELL_COLUMNS}, measures, mac)"  # noqa: S608
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*key, text, self._mac("cell", _json([*key, text]))),
            )
            summary = days.setdefault(key[0] // _SLOTS_PER_DAY, [0] * (len(MEASURES) + 1))
            summary[0] += int(new_cell)
            for index, value in enumerate(measures):
                summary[index + 1] += value
        for day, delta in days.items():
            found = self.db.execute(
                "SELECT summary, mac FROM days WHERE day = ?", (day,)
            ).fetchone()
            old = [0] * len(delta) if found is None else self._checked("day", found[0], found[1])
            body = _json([day, *[a + b for a, b in zip(old[-len(delta) :], delta, strict=True)]])
            self.db.execute(
                "INSERT OR REPLACE INTO days (day, summary, mac) VALUES (?, ?, ?)",
                (day, body, self._mac("day", body)),
            )
        for slot, mark in marks.items():
            body = _json([slot, *mark])
            self.db.execute(
                "INSERT OR IGNORE INTO marks (slot, mark, mac) VALUES (?, ?, ?)",
                (slot, body, self._mac("mark", body)),
            )

    def save_position(self, position: dict[str, Any]) -> None:
        """Record the chain position the rows now reflect."""
        body = _json(position)
        self.db.execute(
            "INSERT OR REPLACE INTO meta (id, body, mac) VALUES (1, ?, ?)",
            (body, self._mac("meta", body)),
        )

    def cells(self, first_slot: int, end_slot: int) -> list[tuple[CellKey, tuple[int, ...]]]:
        """The cells of slots ``[first_slot, end_slot)``, each day's rows checked whole.

        Raises:
            StateMismatchError: a row fails its MAC, or a day's rows are not what
                its summary vouches for (a row added, removed or replayed).
        """
        first_day, last_day = first_slot // _SLOTS_PER_DAY, (end_slot - 1) // _SLOTS_PER_DAY
        found: dict[int, list[int]] = {}
        out: list[tuple[CellKey, tuple[int, ...]]] = []
        rows = self.db.execute(
            f"SELECT {_CELL_COLUMNS}, measures, mac FROM cells"  # noqa: S608 - fixed columns
            " WHERE slot >= ? AND slot < ?",
            (first_day * _SLOTS_PER_DAY, (last_day + 1) * _SLOTS_PER_DAY),
        )
        for row in rows:
            key: CellKey = tuple(row[:8])
            measures = tuple(json.loads(self._checked("cell", _json([*key, row[8]]), row[9])[-1]))
            summary = found.setdefault(key[0] // _SLOTS_PER_DAY, [0] * (len(MEASURES) + 1))
            summary[0] += 1
            for index, value in enumerate(measures):
                summary[index + 1] += value
            if first_slot <= key[0] < end_slot:
                out.append((key, measures))
        vouched = {
            day: self._checked("day", body, mac)[1:]
            for day, body, mac in self.db.execute(
                "SELECT day, summary, mac FROM days WHERE day >= ? AND day <= ?",
                (first_day, last_day),
            )
        }
        if vouched != found:
            raise StateMismatchError("rollups: a day's rows differ from its summary (edited?)")
        return out

    def mark_from(self, slot: int) -> list[Any] | None:
        """The chain position before the first entry sealed at or after ``slot``, or ``None``."""
        row = self.db.execute(
            "SELECT mark, mac FROM marks WHERE slot >= ? ORDER BY slot LIMIT 1", (slot,)
        ).fetchone()
        return None if row is None else list(self._checked("mark", row[0], row[1])[1:])


class RollupFile:
    """The rollups of one home."""

    def __init__(self, path: Path, mac_key_path: Path, timeout_seconds: float = 10.0) -> None:
        self.path = path
        self.mac_key_path = mac_key_path
        self.timeout_seconds = timeout_seconds

    def _key(self) -> bytes:
        try:
            return read_regular(self.mac_key_path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.mac_key_path}: {exc.strerror}") from exc
        with contextlib.suppress(FileExistsError):
            self.mac_key_path.parent.mkdir(parents=True, exist_ok=True)
            exclusive_create(self.mac_key_path, os.urandom(32), 0o600)
        try:
            return read_regular(self.mac_key_path)
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.mac_key_path}: {exc.strerror}") from exc

    @contextlib.contextmanager
    def writing(self, wait_seconds: float | None = None) -> Iterator[RollupWriter]:
        """One immediate transaction, committed when the block ends without an error.

        ``wait_seconds``: how long to wait for another writer (default: the
        lock timeout).

        Raises:
            StateMismatchError: the file is not a readable database, or a row it
                reads fails its MAC.
            ChainIOError: the MAC key or the state folder cannot be read.
        """
        key = self._key()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):  # SQLite's own files take its mode
                exclusive_create(self.path, b"", 0o600)
            wait = self.timeout_seconds if wait_seconds is None else wait_seconds
            db = sqlite3.connect(self.path, timeout=wait, isolation_level=None)
        except OSError as exc:
            raise ChainIOError(f"cannot open {self.path}: {exc.strerror}") from exc
        except sqlite3.Error as exc:
            raise StateMismatchError(f"rollups unreadable: {exc}") from exc
        try:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=OFF")  # derived and rebuildable: never fsync'd
                db.executescript(_SCHEMA + CALLS_SCHEMA + BUDGET_FACTS_SCHEMA)
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _failure(exc) from exc
            try:
                yield RollupWriter(db, key)
            except BaseException:
                db.rollback()
                raise
            try:
                db.commit()
            except sqlite3.Error as exc:
                raise _failure(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise _failure(exc) from exc
        finally:
            db.close()

    def carry_trust_over(self, before: str, after: str) -> None:
        """Mark rollups verified under trust store ``before`` as verified under ``after``.

        For a key rotation, which leaves every entry verified before it
        verifying after; nothing is made when there are no rollups yet.

        Raises:
            StateMismatchError, ChainIOError: as ``writing``.
        """
        if not self.path.exists():
            return
        with self.writing() as tx:
            position = tx.position()
            if position is not None and position.get("trust") == before:
                tx.save_position({**position, "trust": after})

    def delete(self) -> None:
        """Remove the rollups (rebuilt from the chain on next use)."""
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{self.path}{suffix}").unlink()
