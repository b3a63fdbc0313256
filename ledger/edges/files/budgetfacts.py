"""The budget facts in the rollups database (``ledger.core.budget_facts``), each row MAC'd.

Tables: ``budget_scopes`` (a call scope as JSON → a number, so a cell keys
on two small integers), ``budget_cells`` (a record slot and scope, a live
verdict's scope and slot → micro-USD and the newest record's line and time),
``budget_pending`` (live reservations by verdict ref) and ``budget_doubts``
(quarter hours the facts cannot count exactly). Every row carries an
HMAC-SHA256 over its table and values under the home's derived-state key, so
an edited or replayed row is found when read; the rollups' MAC'd position
holds the number of cells, reservations and doubts and the cells' micro-USD sum, so a
deleted row is found too. Whatever fails its check makes the reader fall
back to folding the chain, never to a smaller figure.
"""

import hashlib
import hmac
import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from ledger.core.budget_facts import Cell, CellKey, FactsFold, Pending, merge
from ledger.core.budgets import CallScope
from ledger.errors import StateMismatchError

SCHEMA = """
CREATE TABLE IF NOT EXISTS budget_scopes (id INTEGER PRIMARY KEY, scope TEXT NOT NULL UNIQUE,
    mac BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS budget_cells (
    r_slot INTEGER NOT NULL, r_scope INTEGER NOT NULL, v_scope INTEGER NOT NULL,
    v_slot INTEGER NOT NULL, micros INTEGER NOT NULL, last_line INTEGER NOT NULL,
    last_ts TEXT NOT NULL, mac BLOB NOT NULL,
    PRIMARY KEY (r_slot, r_scope, v_scope, v_slot)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS budget_pending (ref TEXT PRIMARY KEY, scope INTEGER NOT NULL,
    ts TEXT NOT NULL, micros INTEGER NOT NULL, expires TEXT NOT NULL, mac BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS budget_doubts (slot INTEGER PRIMARY KEY, mac BLOB NOT NULL);
"""
TABLES = ("budget_scopes", "budget_cells", "budget_pending", "budget_doubts")
NO_SCOPE = 0  # the verdict scope of a cell whose record settled nothing live
_CHUNK = 500  # ids per ``IN (...)`` query


def _mismatch(what: str) -> StateMismatchError:
    return StateMismatchError(f"rollups: a budget {what} does not match its MAC (edited?)")


class BudgetFactsTable:
    """The budget facts of one rollups database, read and written in its transaction."""

    def __init__(self, db: sqlite3.Connection, key: bytes) -> None:
        self.db = db
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)
        self._ids: dict[CallScope, int] = {}

    def _mac(self, *parts: object) -> bytes:
        mac = self._keyed.copy()
        mac.update("\x1f".join(str(part) for part in parts).encode())
        return mac.digest()

    def _check(self, mac: bytes, what: str, *parts: object) -> None:
        if not hmac.compare_digest(self._mac(*parts), bytes(mac)):
            raise _mismatch(what)

    # -- scopes ---------------------------------------------------------------

    def _scope_id(self, scope: CallScope) -> int:
        found = self._ids.get(scope)
        if found is not None:
            return found
        text = json.dumps([*scope[:-2], list(scope.tags), scope.client], separators=(",", ":"))
        row = self.db.execute(
            "SELECT id, mac FROM budget_scopes WHERE scope = ?", (text,)
        ).fetchone()
        if row is not None:
            self._check(row[1], "scope", "scope", row[0], text)
            number = int(row[0])
        else:
            cursor = self.db.execute(
                "INSERT INTO budget_scopes (scope, mac) VALUES (?, x'')", (text,)
            )
            number = int(cursor.lastrowid or 0)
            self.db.execute(
                "UPDATE budget_scopes SET mac = ? WHERE id = ?",
                (self._mac("scope", number, text), number),
            )
        self._ids[scope] = number
        return number

    def _scopes(self, ids: Iterable[int]) -> dict[int, CallScope]:
        wanted = sorted({number for number in ids if number != NO_SCOPE})
        found: dict[int, CallScope] = {}
        for at in range(0, len(wanted), _CHUNK):
            part = wanted[at : at + _CHUNK]
            marks = ",".join("?" * len(part))
            rows = self.db.execute(
                f"SELECT id, scope, mac FROM budget_scopes WHERE id IN ({marks})",  # noqa: S608
                part,
            ).fetchall()
            for number, text, mac in rows:
                self._check(mac, "scope", "scope", number, text)
                provider, agent, model, session, key, tags, client = json.loads(text)
                found[int(number)] = CallScope(
                    provider, agent, model, session, key, tuple(tags), client
                )
        if len(found) != len(wanted):
            raise StateMismatchError("rollups: a budget scope is missing (deleted?)")
        return found

    # -- writing --------------------------------------------------------------

    def find_pending(self, ref: str) -> Pending | None:
        """The live reservation of verdict ``ref`` as stored, or ``None``."""
        row = self.db.execute(
            "SELECT scope, ts, micros, expires, mac FROM budget_pending WHERE ref = ?", (ref,)
        ).fetchone()
        if row is None:
            return None
        scope, ts, micros, expires, mac = row
        self._check(mac, "reservation", "pending", ref, scope, ts, micros, expires)
        return Pending(self._scopes([scope])[scope], ts, int(micros), expires)

    def write(self, fold: FactsFold, totals: dict[str, Any]) -> dict[str, Any]:
        """Store what ``fold`` gathered; the new totals (``max_ts``, cells, micros, pending)."""
        cells, micros, pending = int(totals["cells"]), int(totals["micros"]), int(totals["pending"])
        doubts = int(totals["doubts"])
        for key, added in fold.cells.items():
            columns = (
                key.r_slot, self._scope_id(key.r_scope),
                NO_SCOPE if key.v_scope is None else self._scope_id(key.v_scope), key.v_slot,
            )  # fmt: skip
            row = self.db.execute(
                "SELECT micros, last_line, last_ts, mac FROM budget_cells WHERE r_slot = ?"
                " AND r_scope = ? AND v_scope = ? AND v_slot = ?",
                columns,
            ).fetchone()
            cell = added
            if row is None:
                cells += 1
            else:
                self._check(row[3], "cell", "cell", *columns, *row[:3])
                cell = merge(Cell(int(row[0]), int(row[1]), row[2]), added)
            micros += cell.micros - (0 if row is None else int(row[0]))
            values = (*columns, cell.micros, cell.last_line, cell.last_ts)
            self.db.execute(
                "INSERT OR REPLACE INTO budget_cells (r_slot, r_scope, v_scope, v_slot, micros,"
                " last_line, last_ts, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, self._mac("cell", *values)),
            )
        for ref in fold.settled:
            pending -= self.db.execute("DELETE FROM budget_pending WHERE ref = ?", (ref,)).rowcount
        for ref, held in fold.added.items():
            reservation = (ref, self._scope_id(held.scope), held.ts, held.micros, held.expires)
            pending += self.db.execute(
                "INSERT OR REPLACE INTO budget_pending (ref, scope, ts, micros, expires, mac)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (*reservation, self._mac("pending", *reservation)),
            ).rowcount
        if fold.max_ts is not None:
            # Expired: the fold forgot them (a forwarded one never expires).
            pending -= self.db.execute(
                "DELETE FROM budget_pending WHERE expires <= ?", (fold.max_ts,)
            ).rowcount
        for slot in fold.doubts:
            doubts += self.db.execute(
                "INSERT OR IGNORE INTO budget_doubts (slot, mac) VALUES (?, ?)",
                (slot, self._mac("doubt", slot)),
            ).rowcount
        fold.cells, fold.added, fold.settled, fold.doubts = {}, {}, set(), set()
        return {
            "max_ts": fold.max_ts, "cells": cells, "micros": micros, "pending": pending,
            "doubts": doubts,
        }  # fmt: skip

    def clear(self) -> None:
        """Forget every row (before a fold from the first entry)."""
        for table in TABLES:
            self.db.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed table names
        self._ids = {}

    # -- reading --------------------------------------------------------------

    def read(
        self, from_slot: int, totals: dict[str, Any]
    ) -> tuple[list[tuple[CellKey, Cell]], list[tuple[str, Pending]], list[int]]:
        """The cells from ``from_slot`` on, every live reservation and the doubts from then.

        Raises:
            StateMismatchError: a row fails its MAC, or a row is missing or was
                added (the counts and sum differ from ``totals``).
        """
        count, total = self.db.execute(
            "SELECT count(*), coalesce(sum(micros), 0) FROM budget_cells"
        ).fetchone()
        (held,) = self.db.execute("SELECT count(*) FROM budget_pending").fetchone()
        (doubted,) = self.db.execute("SELECT count(*) FROM budget_doubts").fetchone()
        if (count, total, held, doubted) != tuple(
            totals[name] for name in ("cells", "micros", "pending", "doubts")
        ):
            raise StateMismatchError("rollups: the budget facts lost or gained a row")
        rows = self.db.execute(
            "SELECT r_slot, r_scope, v_scope, v_slot, micros, last_line, last_ts, mac"
            " FROM budget_cells WHERE r_slot >= ?",
            (from_slot,),
        ).fetchall()
        pending_rows = self.db.execute(
            "SELECT ref, scope, ts, micros, expires, mac FROM budget_pending"
        ).fetchall()
        scopes = self._scopes(
            [*(row[1] for row in rows), *(row[2] for row in rows), *(r[1] for r in pending_rows)]
        )
        cells = []
        for *values, mac in rows:
            self._check(mac, "cell", "cell", *values)
            r_slot, r_scope, v_scope, v_slot, micros, last_line, last_ts = values
            key = CellKey(scopes.get(v_scope), v_slot, scopes[r_scope], r_slot)
            cells.append((key, Cell(micros, last_line, last_ts)))
        pending = []
        for ref, scope, ts, micros, expires, mac in pending_rows:
            self._check(mac, "reservation", "pending", ref, scope, ts, micros, expires)
            pending.append((ref, Pending(scopes[scope], ts, micros, expires)))
        doubts = []
        for slot, mac in self.db.execute(
            "SELECT slot, mac FROM budget_doubts WHERE slot >= ?", (from_slot,)
        ).fetchall():
            self._check(mac, "doubt", "doubt", slot)
            doubts.append(int(slot))
        return cells, pending, doubts
