"""A verdict or record entry as a call: the live feed's events and the calls table's rows.

The calls table (one row per call: its verdict joined with its record) is
kept with the rollups (``services/views/rollups``), folded from the verified
chain; the live feed sends each entry as ``event_of`` reads it.
"""

from typing import TYPE_CHECKING, Any

from ledger.core.envelope import EnvelopeFormatError, parse_line

if TYPE_CHECKING:
    from ledger.core.envelope import ParsedEntry

VERDICT_EVENTS = {
    "budget.allow": "allow",
    "budget.warn_90": "warn-90",
    "budget.halt_100": "halt-100",
    "budget.halt_uncertainty": "halt-uncertainty",
}
RECORD_EVENT = "budget.record_call"


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
    """A verdict or record entry (line ``number``) as the live feed sends it, else ``None``."""
    if b'"budget.' not in line:
        return None
    try:
        parsed = parse_line(line.rstrip(b"\n"))
    except EnvelopeFormatError:
        return None
    return event_of_entry(number, parsed)


def event_of_entry(number: int, parsed: "ParsedEntry") -> dict[str, Any] | None:
    """A parsed verdict or record entry as an event (``kind`` ``verdict`` or ``record``)."""
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


def row_of_record(event: dict[str, Any]) -> dict[str, Any]:
    """The row of a record whose verdict is not in the chain (sealed outside a gate)."""
    return {
        **{key: value for key, value in event.items() if key != "kind"},
        "verdict": None, "verdict_ref": event["entry_hash"], "deciding_cap": None,
        "estimated_micros": None, "clamped_tokens": None, "uncertainty_reason": None,
        "actual_micros": None, "record_ref": None, "record_time": None,
    }  # fmt: skip


def settle(row: dict[str, Any], event: dict[str, Any]) -> None:
    """Join a record ``event`` to its call's ``row`` (in place): its amount, ref and time."""
    amount = event["actual_micros"]
    amount = amount if isinstance(amount, int) and not isinstance(amount, bool) else 0
    row["actual_micros"] = (row.get("actual_micros") or 0) + amount
    row["record_ref"] = event["entry_hash"]
    row["record_time"] = event["time"]
    for field in ("model", "provider", "client", "agent", "session", "key"):
        if row.get(field) is None and event.get(field) is not None:
            row[field] = event[field]
