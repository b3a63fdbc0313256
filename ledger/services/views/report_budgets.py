"""The ``[[budgets]]`` of one budget day for ``ledger report`` (SPEC §10, §12).

Fed by the report's walk over the verified chain. The budgets' counters are
folded with the gate's own fold (``core.budget_state``): a record counts
toward the budgets its verdict matched, in the period its reservation was
admitted in, exactly as the gate counted it. A budget is shown when it
applied to one of the day's calls (a verdict sealed during the day, whatever
its outcome, or a record that counted on the day), with one row for each
``per`` value those calls carried.

Figures are the ones the gate read at the day's end (or now, for a day not
yet over): for a calendar period, the period that contains the day, up to
then; for a rolling window, the window ending then. Halts are the day's
verdicts whose ``deciding_cap`` names the budget (``budget:<name>`` or
``budget:<name>[<value>]``).
"""

import datetime as dt
from collections import Counter as Tally
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ledger.core.budget_state import apply_budget_event, apply_budget_prices, empty_budget_state
from ledger.core.budget_state import figures as budget_figures
from ledger.core.budgets import Applicable, Budget, CallScope, applicable
from ledger.core.foldable import Foldable, check_entry
from ledger.core.state import OPERATOR_RESETS
from ledger.core.timefmt import format_ts, parse_ts
from ledger.core.units import micros_to_usd, percent
from ledger.services.views.metrics import VERDICT_EVENTS

if TYPE_CHECKING:
    from ledger.core.envelope import ParsedEntry
    from ledger.core.foldable import SchemaFor

_ONE_US = dt.timedelta(microseconds=1)


class DayBudgets:
    """Folds the budgets' counters and keeps the figures of those that applied on the day."""

    def __init__(
        self, budgets: Sequence[Budget], zone: dt.tzinfo, schema_for: "SchemaFor",
        start: str, end: str,
    ) -> None:  # fmt: skip
        self.budgets = tuple(budgets)
        self.zone, self.schema_for = zone, schema_for
        self.start, self.end = start, end
        self.state = empty_budget_state(self.budgets)
        self.seen: dict[tuple[str, str | None], Applicable] = {}
        self.rows: list[dict[str, Any]] | None = None
        # Each shown budget's used spend through the day, for the report's chart.
        self.series: dict[tuple[str, str | None], list[list[Any]]] = {}

    def see(self, parsed: "ParsedEntry") -> None:
        """Any verified entry, in chain order, before it is folded."""
        if not self.budgets:
            return
        ts, event_type = parsed.ts_utc, parsed.event_type
        if self.rows is None and ts >= self.end:
            self.rows = self._figures(self.end)
        if not event_type.startswith("budget.") and event_type not in OPERATOR_RESETS:
            return
        checked = check_entry(event_type, ts, parsed.payload, self.schema_for)
        if not isinstance(checked, Foldable):
            return
        payload = checked.payload
        if event_type in OPERATOR_RESETS:
            priced = payload.get("priced")
            if isinstance(priced, list):
                apply_budget_prices(self.state, self.budgets, priced)
            return
        touched: list[Applicable] = []
        if self.start <= ts < self.end and (
            event_type in VERDICT_EVENTS or event_type == "budget.record_call"
        ):
            for found in applicable(self.budgets, CallScope.from_payload(payload)):
                key = (found.budget.name, found.per_value)
                if key not in self.seen:
                    self.seen[key] = found
                    self.series[key] = [[self.start, self._used(found, ts)]]
                touched.append(found)
        apply_budget_event(
            self.state, self.budgets, event_type, ts, payload, parsed.entry_hash, self.zone
        )
        for found in touched:
            points = self.series[(found.budget.name, found.per_value)]
            used = self._used(found, ts)
            if used != points[-1][1]:
                points.append([ts, used])

    def _used(self, found: Applicable, ts: str) -> int:
        return max(budget_figures(self.state, found, parse_ts(ts), self.zone).used_micros, 0)

    def _figures(self, moment_text: str) -> list[dict[str, Any]]:
        moment = parse_ts(moment_text)
        last = min(moment, parse_ts(self.end) - _ONE_US)  # a calendar period holds the day's end
        order = {budget.name: index for index, budget in enumerate(self.budgets)}
        rows = []
        for key in sorted(self.seen, key=lambda k: (order[k[0]], k[1] or "")):
            found = self.seen[key]
            rolling = found.budget.window_seconds is not None
            seen = budget_figures(self.state, found, moment if rolling else last, self.zone)
            row = _row(found, seen, moment if rolling else None)
            row["series"] = self.series.get(key, [[self.start, 0]])
            rows.append(row)
        return rows

    def document(self, now: dt.datetime, halts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The JSON ``budgets`` list: the figures at the day's end (or now) and the halts."""
        rows = self.rows
        if rows is None:
            rows = self._figures(min(self.end, format_ts(now)))
        decided: Tally[str] = Tally(
            str(h["deciding_cap"])
            for h in halts
            if str(h.get("deciding_cap")).startswith("budget:")
        )
        for row in rows:
            row["halts"] = decided[row["scope"]]
        return rows


def _row(found: Applicable, seen: Any, rolling_end: dt.datetime | None) -> dict[str, Any]:
    budget = found.budget
    used = max(seen.used_micros, 0)
    reserved = seen.reserved_micros
    cap = found.cap_micros
    end = rolling_end if rolling_end is not None else seen.period_end
    return {
        "name": budget.name,
        "period": budget.period,
        "per": budget.per,
        "per_value": found.per_value,
        "period_start": format_ts(seen.period_start),
        "period_end": format_ts(end),
        "used": micros_to_usd(used),
        "reserved": micros_to_usd(reserved),
        "cap": micros_to_usd(cap),
        "used_micros": used,
        "reserved_micros": reserved,
        "cap_micros": cap,
        "usage_pct": f"{float(percent(used + reserved, cap)):.4f}" if cap else None,
        "scope": found.scope_key,
    }
