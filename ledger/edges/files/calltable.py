"""The calls table inside ``state/rollups.sqlite3``: one row per call, newest first by line.

A row is a verdict joined with its record (``services/views/calls``): keyed
by the verdict's chain line (a record sealed without a verdict: its own
line), found by its ``verdict_ref``, and MAC'd like every row of the rollups.
The filter columns hold "" for a call without a value; a row's ``tags`` are
its JSON list, matched element by element. Indexes on every column a page
filters by (key, agent, session, model, provider, client, verdict) and on both
times keep a page O(log n + limit) whatever the chain's length; a tag filter
reads rows newest first until it has a page. A row's body holds only what
its columns do not (``callrows``); its MAC is a SHA-256 HMAC over the whole row.
"""

import hashlib
import hmac
import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ledger.edges.files import callrows
from ledger.errors import StateMismatchError

SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    line INTEGER PRIMARY KEY, ref BLOB NOT NULL UNIQUE, time TEXT NOT NULL,
    record_time TEXT NOT NULL, verdict TEXT NOT NULL, agent TEXT NOT NULL,
    session TEXT NOT NULL, key TEXT NOT NULL, model TEXT NOT NULL, provider TEXT NOT NULL,
    client TEXT NOT NULL, tags TEXT NOT NULL, actual INTEGER NOT NULL,
    body TEXT NOT NULL, mac BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_key ON calls (key, line);
CREATE INDEX IF NOT EXISTS calls_agent ON calls (agent, line);
CREATE INDEX IF NOT EXISTS calls_session ON calls (session, line);
CREATE INDEX IF NOT EXISTS calls_verdict ON calls (verdict, line);
CREATE INDEX IF NOT EXISTS calls_model ON calls (model, line);
CREATE INDEX IF NOT EXISTS calls_provider ON calls (provider, line);
CREATE INDEX IF NOT EXISTS calls_client ON calls (client, line);
CREATE INDEX IF NOT EXISTS calls_time ON calls (time);
CREATE INDEX IF NOT EXISTS calls_record_time ON calls (record_time);
"""
COLUMNS = ("agent", "session", "key", "model", "provider", "client", "verdict")


# What a reader selects: the columns a row is read back from, then its MAC.
_READ = f"line, {', '.join(callrows.COLUMNS)}, body, mac"


class CallTable:
    """The calls of one open rollup transaction."""

    def __init__(self, db: sqlite3.Connection, key: bytes) -> None:
        self.db, self.key = db, key

    def _mac(self, row: dict[str, Any]) -> bytes:
        text = callrows.dumps(row)
        return hmac.new(self.key, f"call\n{text}".encode(), hashlib.sha256).digest()

    def _row(self, found: Sequence[Any]) -> dict[str, Any]:
        *stored, body, mac = found
        try:
            row = callrows.row_of(stored, body)
        except (ValueError, TypeError, KeyError) as exc:
            raise StateMismatchError("rollups: a call row cannot be read (edited?)") from exc
        if not isinstance(mac, bytes) or not hmac.compare_digest(self._mac(row), mac):
            raise StateMismatchError("rollups: a call row does not match its MAC (edited?)")
        return row

    def _put(self, row: dict[str, Any]) -> None:
        stored, body = callrows.encode(row)
        self.db.execute(
            f"INSERT OR REPLACE INTO calls ({_READ}) VALUES ({', '.join('?' * 15)})",  # noqa: S608
            (*stored, body, self._mac(row)),
        )

    def by_ref(self, ref: str) -> dict[str, Any] | None:
        """The row of the call whose verdict (or lone record) is ``ref``."""
        found = self.db.execute(
            f"SELECT {_READ} FROM calls WHERE ref = ?",  # noqa: S608
            (callrows.ref_column(ref),),
        ).fetchone()
        return None if found is None else self._row(found)

    def put(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert or replace whole rows."""
        for row in rows:
            self._put(row)

    def clear(self) -> None:
        """Forget every call."""
        self.db.execute("DELETE FROM calls")

    @staticmethod
    def _where(
        equal: Mapping[str, str], start: str | None, end: str | None, time: str = "time"
    ) -> tuple[str, list[Any]]:
        clauses, params = ["1 = 1"], []
        for name, value in equal.items():
            if name == "tag":
                clauses.append("instr(tags, ?) > 0")
                params.append(json.dumps(value))
            elif name in COLUMNS:
                clauses.append(f"{name} = ?")
                params.append(value)
            else:
                raise ValueError(f"no such call column: {name}")
        if start is not None:
            clauses.append(f"{time} >= ?")
            params.append(start)
        if end is not None:
            clauses.append(f"{time} < ? AND {time} != ''")
            params.append(end)
        return " AND ".join(clauses), params

    def page(
        self,
        equal: Mapping[str, str],
        start: str | None,
        end: str | None,
        before_line: int | None,
        limit: int,
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` rows, newest first, before line ``before_line``, matching the filters."""
        where, params = self._where(equal, start, end)
        if before_line is not None:
            where += " AND line < ?"
            params.append(before_line)
        rows = self.db.execute(
            f"SELECT {_READ} FROM calls WHERE {where} ORDER BY line DESC LIMIT ?",  # noqa: S608
            [*params, limit],
        )
        return [self._row(found) for found in rows]

    def recorded_since(self, since: str, equal: Mapping[str, str] | None = None) -> int:
        """Micro-USD recorded at or after ``since`` (by the record's time)."""
        where, params = self._where(equal or {}, since, None, "record_time")
        found = self.db.execute(
            f"SELECT COALESCE(SUM(actual), 0) FROM calls WHERE {where}",  # noqa: S608
            params,
        ).fetchone()
        return int(found[0])

    def halt_times(self, since: str) -> list[str]:
        """The times of halted verdicts at or after ``since``."""
        rows = self.db.execute(
            "SELECT time FROM calls WHERE time >= ? AND verdict LIKE 'halt%'", (since,)
        )
        return [str(row[0]) for row in rows]

    def groups(
        self, by: str, equal: Mapping[str, str], start: str | None, end: str | None
    ) -> list[dict[str, Any]]:
        """Calls, micro-USD and halts per value of ``by``, over rows recorded in the range.

        A call with several tags counts under each when grouped by tag.
        """
        where, params = self._where(equal, start, end, "record_time")
        halts_where, halt_params = self._where(equal, start, end, "time")
        out: dict[str, dict[str, Any]] = {}

        def bucket(value: str) -> dict[str, Any]:
            return out.setdefault(value, {"value": value, "calls": 0, "micros": 0, "halts": 0})

        column = "tags" if by == "tag" else by
        if column not in (*COLUMNS, "tags"):
            raise ValueError(f"no such call column: {by}")
        recorded = self.db.execute(
            f"SELECT {column}, COUNT(*), SUM(actual) FROM calls WHERE {where}"  # noqa: S608
            f" AND record_time != '' GROUP BY {column}",
            params,
        )
        halted = self.db.execute(
            f"SELECT {column}, COUNT(*) FROM calls WHERE {halts_where}"  # noqa: S608
            f" AND verdict LIKE 'halt%' GROUP BY {column}",
            halt_params,
        )
        for value, calls, micros in recorded:
            for one in json.loads(value) or [""] if by == "tag" else [value]:
                bucket(one)["calls"] += int(calls)
                bucket(one)["micros"] += int(micros or 0)
        for value, halts in halted:
            for one in json.loads(value) or [""] if by == "tag" else [value]:
                bucket(one)["halts"] += int(halts)
        return list(out.values())
