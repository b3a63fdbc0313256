"""What ``ledger report`` shows beside the caps: the day's bill readings and spend breakdown.

Fed by the report's walk over the verified chain. A bill reading (a
successful ``budget.observation``, or the reading a ``budget.reconcile``
took) belongs to the budget day it was fetched on, as the gate counts it.
The breakdown groups the records that counted on the day by model, session
(``cycle_id``) or agent; a record that names none of its own takes the value
from the verdict it settles (its ``verdict_ref``), and a call with no value
at all is grouped as ``(none)``.
"""

import datetime as dt
from typing import TYPE_CHECKING, Any

from ledger.core.foldable import Foldable, check_entry
from ledger.core.timefmt import budget_day, day_bounds, format_ts, parse_ts
from ledger.core.units import micros_to_usd, percent
from ledger.services.views.metrics import VERDICT_EVENTS

if TYPE_CHECKING:
    from ledger.core.envelope import ParsedEntry
    from ledger.core.foldable import SchemaFor

BREAKDOWN_KEYS = ("model", "session", "agent")
NO_VALUE = "(none)"
_RECORD_FIELD = {"model": "model_id", "session": "cycle_id"}
_VERDICT_FIELD = {"model": "model", "session": "cycle_id", "agent": "agent"}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _scope(provider: str) -> str:
    return provider if provider == "aggregate" else f"provider:{provider}"


class DayDetail:
    """Collects one budget day's bill readings and, with ``by``, its breakdown."""

    def __init__(
        self, day: str, zone: dt.tzinfo, schema_for: "SchemaFor", by: str | None, since: str
    ) -> None:
        self.day, self.zone, self.schema_for, self.by = day, zone, schema_for, by
        self.since = since  # verdicts older than this settle nothing on the day
        self.start = format_ts(day_bounds(day, zone)[0])  # a reading is sealed after its fetch
        self.readings: list[dict[str, Any]] = []
        self.verdict_values: dict[str, str | None] = {}
        self.rows: dict[str, list[int]] = {}
        self.unpriced: dict[str, str] = {}

    def see(self, parsed: "ParsedEntry") -> None:
        """Any verified entry, in chain order (before its record is tallied)."""
        event_type = parsed.event_type
        if event_type in VERDICT_EVENTS:
            if self.by is not None and parsed.ts_utc >= self.since:
                payload: Any = parsed.payload
                value = payload.get(_VERDICT_FIELD[self.by]) if isinstance(payload, dict) else None
                self.verdict_values[parsed.entry_hash] = _text(value)
        elif event_type in {"budget.observation", "budget.reconcile"} and (
            parsed.ts_utc >= self.start
        ):
            checked = check_entry(event_type, parsed.ts_utc, parsed.payload, self.schema_for)
            if isinstance(checked, Foldable):
                body = checked.payload
                reading = body if event_type == "budget.observation" else body.get("reading")
                if isinstance(reading, dict):
                    self._reading(reading, event_type.split(".", 1)[1])
        elif event_type == "ledger.state_rebuilt" and self.by is not None:
            payload = parsed.payload
            priced = payload.get("priced") if isinstance(payload, dict) else None
            for item in priced if isinstance(priced, list) else []:
                if not isinstance(item, dict):
                    continue
                key = self.unpriced.pop(str(item.get("entry_hash")), None)
                if key is not None and isinstance(item.get("actual_micros"), int):
                    self.rows[key][1] += item["actual_micros"]

    def _reading(self, reading: dict[str, Any], source: str) -> None:
        fetched = reading.get("fetched_at")
        micros = reading.get("usd_used_micros")
        if not reading.get("ok") or not isinstance(fetched, str) or not isinstance(micros, int):
            return
        if budget_day(parse_ts(fetched), self.zone) != self.day:
            return
        provider = str(reading.get("provider"))
        self.readings.append(
            {
                "time": fetched,
                "provider": provider,
                "scope": _scope(provider),
                "usd": micros_to_usd(micros),
                "usd_micros": micros,
                "billing_ts": reading.get("billing_ts"),
                "source": source,
            }
        )

    def record(self, parsed: "ParsedEntry") -> None:
        """A ``budget.record_call`` that counted on the day."""
        if self.by is None:
            return
        payload: Any = parsed.payload
        field = _RECORD_FIELD.get(self.by)
        value = _text(payload.get(field)) if field else None
        if value is None:
            value = self.verdict_values.get(str(payload.get("verdict_ref")))
        key = value or NO_VALUE
        row = self.rows.setdefault(key, [0, 0])
        row[0] += 1
        actual = payload.get("actual_micros")
        if isinstance(actual, int):
            row[1] += actual
        else:
            self.unpriced[parsed.entry_hash] = key

    def breakdown(self) -> dict[str, Any] | None:
        """The JSON ``breakdown`` object, largest spend first; ``None`` without ``by``."""
        if self.by is None:
            return None
        total = sum(micros for _calls, micros in self.rows.values())
        rows = [
            {
                "key": key,
                "calls": calls,
                "usd": micros_to_usd(micros),
                "usd_micros": micros,
                "share_pct": f"{float(percent(micros, total)):.4f}" if total else None,
            }
            for key, (calls, micros) in sorted(
                self.rows.items(), key=lambda item: (-item[1][1], -item[1][0], item[0])
            )
        ]
        return {"by": self.by, "total_usd_micros": total, "rows": rows}
