"""The calls table inside ``state/rollups.sqlite3``: one row per call, newest first by line.

A row is a verdict joined with its record (``services/views/calls``): keyed
by the verdict's chain line (a record sealed without a verdict: its own
line), found by its ``verdict_ref``, and MAC'd like every row of the rollups.
The filter columns hold "" for a call without a value; a row's ``tags`` are
its JSON list, matched element by element. Indexes on every column a page
filters by (key, agent, session, model, provider, client, verdict) and on both
times keep a page O(log n + limit) whatever the chain's length; a tag filter
reads rows newest first until it has a page.
"""

import hashlib
import hmac
import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ledger.errors import StateMismatchError

SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    line INTEGER PRIMARY KEY, ref TEXT NOT NULL UNIQUE, time TEXT NOT NULL,
    record_time TEXT NOT NULL, verdict TEXT NOT NULL, agent TEXT NOT NULL,
    session TEXT NOT NULL, key TEXT NOT NULL, model TEXT NOT NULL, provider TEXT NOT NULL,
    client TEXT NOT NULL, tags TEXT NOT NULL, actual INTEGER NOT NULL,
    body TEXT NOT NULL, mac TEXT NOT NULL
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
_FIELDS = {"agent": "agent", "session": "session", "key": "key", "model": "model",
           "provider": "provider", "client": "client", "verdict": "verdict"}  # fmt: skip


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class CallTable:
    """The calls of one open rollup transaction."""

    def __init__(self, db: sqlite3.Connection, key: bytes) -> None:
        self.db, self.key = db, key

    def _mac(self, body: str) -> str:
        return hmac.new(self.key, f"call\n{body}".encode(), hashlib.sha256).hexdigest()

    def _row(self, body: str, mac: str) -> dict[str, Any]:
        if not hmac.compare_digest(self._mac(body), mac):
            raise StateMismatchError("rollups: a call row does not match its MAC (edited?)")
        row: dict[str, Any] = json.loads(body)
        return row

    def _put(self, row: dict[str, Any]) -> None:
        body = _json(row)
        tags = sorted({t for t in row.get("tags") or [] if isinstance(t, str)})
        amount = row.get("actual_micros")
        self.db.execute(
            "INSERT OR REPLACE INTO calls (line, ref, time, record_time, agent, session, key,"
            " model, provider, client, verdict, tags, actual, body, mac)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                int(row["line"]), str(row["verdict_ref"]), str(row["time"]),
                _text(row.get("record_time")),
                *(_text(row.get(_FIELDS[name])) for name in COLUMNS[:6]),
                _text(row.get("verdict")), _json(tags),
                amount if isinstance(amount, int) and not isinstance(amount, bool) else 0,
                body, self._mac(body),
            ),
        )  # fmt: skip

    def by_ref(self, ref: str) -> dict[str, Any] | None:
        """The row of the call whose verdict (or lone record) is ``ref``."""
        found = self.db.execute("SELECT body, mac FROM calls WHERE ref = ?", (ref,)).fetchone()
        return None if found is None else self._row(found[0], found[1])

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
            f"SELECT body, mac FROM calls WHERE {where} ORDER BY line DESC LIMIT ?",  # noqa: S608
            [*params, limit],
        )
        return [self._row(body, mac) for body, mac in rows]

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
