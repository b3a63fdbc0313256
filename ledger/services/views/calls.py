"""The calls the chain holds, one row per call (its verdict joined with its record).

The console and the gateway's ``/v1/ledger/me`` read entries here only, and
only forward from where they stopped: an index keeps the rows seen so far and
folds the lines sealed since, so a page costs the new entries, not the chain.
The budget day's rollups (``services/views/rollups``) take its place for spend
totals.
"""

import threading
from collections.abc import Iterator
from typing import Any, Protocol

from ledger.core.envelope import EnvelopeFormatError, parse_line

VERDICT_EVENTS = {
    "budget.allow": "allow",
    "budget.warn_90": "warn-90",
    "budget.halt_100": "halt-100",
    "budget.halt_uncertainty": "halt-uncertainty",
}
RECORD_EVENT = "budget.record_call"
_KEEP_ROWS = 200_000  # the newest calls kept in memory; older ones are in reports


def _row_of_verdict(number: int, ts: str, ref: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "line": number, "time": ts, "verdict_ref": ref,
        "verdict": VERDICT_EVENTS.get(str(payload.get("_event")), payload.get("verdict")),
        "deciding_cap": payload.get("deciding_cap"), "provider": payload.get("provider"),
        "model": payload.get("model"), "agent": payload.get("agent"),
        "session": payload.get("cycle_id"), "key": payload.get("key"),
        "tags": list(payload.get("tags") or []), "client": payload.get("client"),
        "estimated_micros": payload.get("estimated_micros"), "actual_micros": None,
        "clamped_tokens": payload.get("clamped_tokens"),
        "uncertainty_reason": payload.get("uncertainty_reason"),
        "record_ref": None, "record_time": None,
    }  # fmt: skip


def event_of(number: int, line: bytes) -> dict[str, Any] | None:
    """A verdict or record entry as the live feed sends it, else ``None``."""
    if b'"budget.' not in line:
        return None
    try:
        parsed = parse_line(line.rstrip(b"\n"))
    except EnvelopeFormatError:
        return None
    raw: object = parsed.entry.get("payload")
    if not isinstance(raw, dict):
        return None
    payload: dict[str, Any] = raw
    kind = parsed.event_type
    if kind in VERDICT_EVENTS:
        row = _row_of_verdict(number, parsed.ts_utc, parsed.entry_hash, payload)
        row["verdict"] = VERDICT_EVENTS[kind]
        return {"kind": "verdict", **row}
    if kind == RECORD_EVENT:
        return {
            "kind": "record", "line": number, "time": parsed.ts_utc,
            "entry_hash": parsed.entry_hash, "verdict_ref": payload.get("verdict_ref"),
            "provider": payload.get("provider"), "model": payload.get("model_id"),
            "agent": payload.get("agent"), "session": payload.get("cycle_id"),
            "key": payload.get("key"), "tags": list(payload.get("tags") or []),
            "client": payload.get("client"), "actual_micros": payload.get("actual_micros"),
            "input_tokens": payload.get("input_tokens"),
            "output_tokens": payload.get("output_tokens"),
        }  # fmt: skip
    return None


class LineSource(Protocol):
    """What the index reads: a chain store's lines (``ChainStore`` fits)."""

    def exists(self) -> bool:
        """Whether there is a chain."""
        ...

    def iter_lines(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Lines ``start`` (from 0) up to ``end``."""
        ...


class CallIndex:
    """Every call seen so far, newest last, followed forward from the chain's lines."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen = 0
        self._position = 0  # the byte after the last line read
        self._first = b""
        self.rows: list[dict[str, Any]] = []
        self._by_ref: dict[str, dict[str, Any]] = {}

    def follow(self, lines: LineSource) -> None:
        """Fold the lines sealed since the last call (from the top if the chain changed)."""
        with self._lock:
            first = b""
            if lines.exists():
                first = next(iter(lines.iter_lines(0)), b"")
            if first != self._first:  # a recovered or replaced chain: start again
                self._seen, self._position, self.rows, self._by_ref = 0, 0, [], {}
                self._first = first
            for line in lines.iter_lines(self._position) if first else ():
                if not line.endswith(b"\n"):
                    break  # a line still being written (or torn): not an entry yet
                self._seen += 1
                self._position += len(line)
                self._fold(self._seen, line)
            if len(self.rows) > _KEEP_ROWS:
                for row in self.rows[: len(self.rows) - _KEEP_ROWS]:
                    self._by_ref.pop(row["verdict_ref"], None)
                del self.rows[: len(self.rows) - _KEEP_ROWS]

    def _fold(self, number: int, line: bytes) -> None:
        event = event_of(number, line)
        if event is None:
            return
        if event["kind"] == "verdict":
            row = {key: value for key, value in event.items() if key != "kind"}
            self.rows.append(row)
            self._by_ref[row["verdict_ref"]] = row
            return
        found = self._by_ref.get(str(event["verdict_ref"]))
        if found is not None:
            row = found
        else:  # a record with no verdict seen (sealed outside a gate): its own row
            row = {
                **{key: value for key, value in event.items() if key != "kind"},
                "verdict": None, "verdict_ref": event["entry_hash"], "deciding_cap": None,
                "estimated_micros": None, "clamped_tokens": None, "uncertainty_reason": None,
            }  # fmt: skip
            self.rows.append(row)
            self._by_ref[row["verdict_ref"]] = row
        row["actual_micros"] = (row.get("actual_micros") or 0) + (event["actual_micros"] or 0)
        row["record_ref"] = event["entry_hash"]
        row["record_time"] = event["time"]
        for field in ("model", "client", "agent", "session", "key"):
            if row.get(field) is None and event.get(field) is not None:
                row[field] = event[field]

    def tail(self, lines: LineSource) -> tuple[int, int]:
        """The chain's end (byte position, line count), caught up first."""
        self.follow(lines)
        with self._lock:
            return self._position, self._seen

    @property
    def entries(self) -> int:
        """How many of the chain's lines have been read."""
        return self._seen

    def newest_first(self) -> Iterator[dict[str, Any]]:
        """The rows, newest first."""
        with self._lock:
            rows: list[dict[str, Any]] = list(self.rows)
        return iter(rows[::-1])
