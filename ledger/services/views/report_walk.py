"""The walk behind ``ledger report``: every verified entry folded, one day's figures kept.

After each entry that can move the day's spend (``SPEND_EVENTS``), every
scope's counter is sampled, which gives the cumulative series; verdicts and
reconciles sealed during the day are tallied from their entries. The report
itself is drawn from the walk in ``ledger.services.views.report``.
"""

import copy
import datetime as dt
from collections import Counter as Tally
from typing import TYPE_CHECKING, Any

from ledger.core.foldable import Foldable, check_entry
from ledger.core.spend import AGGREGATE, scope_state
from ledger.core.state import apply_parsed, empty_state
from ledger.core.timefmt import day_bounds, format_ts, parse_ts
from ledger.services.views.metrics import VERDICT_EVENTS
from ledger.services.views.report_budgets import DayBudgets
from ledger.services.views.report_detail import DayDetail

if TYPE_CHECKING:
    from ledger.core.config import Config
    from ledger.core.envelope import ParsedEntry
    from ledger.core.foldable import SchemaFor

SPEND_EVENTS = frozenset(
    {"budget.record_call", "budget.reconcile", "ledger.state_rebuilt", "ledger.recovered"}
)


def scope_names(usd: dict[str, Any], day: str, config: "Config") -> list[str | None]:
    """The aggregate (``None``) and every provider with a sub-cap or spend on ``day``."""
    providers = set(config.provider_caps_micros)
    providers.update(usd["spend"].get(day, {}))
    providers.update(usd["rebase"].get(day, {}))
    providers.discard(AGGREGATE)
    return [None, *sorted(providers)]


def scope_key(provider: str | None) -> str:
    """The name of a scope in the report: the aggregate's, or ``provider:<name>``."""
    return AGGREGATE if provider is None else f"provider:{provider}"


class DayWalk:
    """Folds every verified entry and keeps what the report needs of one day."""

    def __init__(
        self, day: str, zone: dt.tzinfo, config: "Config", schema_for: "SchemaFor",
        checkpoint_entries: int | None, by: str | None = None,
    ) -> None:  # fmt: skip
        self.day = day
        self.zone = zone
        self.config = config
        self.schema_for = schema_for
        start, end = day_bounds(day, zone)
        after = (dt.date.fromisoformat(day) + dt.timedelta(days=1)).isoformat()
        self.start, self.end = format_ts(start), format_ts(end)
        self.held_until = format_ts(day_bounds(after, zone)[1])
        before = (dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat()
        self.detail = DayDetail(day, zone, schema_for, by, format_ts(day_bounds(before, zone)[0]))
        self.budgets = DayBudgets(config.budgets, zone, schema_for, self.start, self.end)
        self.first: str | None = None
        self.last: str | None = None
        self.data = empty_state()
        self.series: dict[str, list[tuple[str, int]]] = {}
        self.records: Tally[str] = Tally()
        self.verdicts: Tally[tuple[str, str | None]] = Tally()
        self.halts: list[dict[str, Any]] = []
        self.reconciles: list[dict[str, Any]] = []
        self.usd_held: dict[str, Any] | None = None
        self.readings_at_end: dict[str, Any] | None = None
        self.checkpoint_entries = checkpoint_entries
        self.hashes: dict[int, str] = {}

    def __call__(self, parsed: "ParsedEntry") -> None:
        """Fold one verified entry, keeping what the day's report needs of it."""
        ts = parsed.ts_utc
        usd = self.data["usd"]
        if ts >= self.end and self.readings_at_end is None:
            self.readings_at_end = copy.deepcopy(usd["readings"])
        if ts >= self.held_until and self.usd_held is None:
            self.usd_held = copy.deepcopy(usd)
        apply_parsed(self.data, parsed, self.schema_for, self.zone)
        number = int(self.data["meta"]["entries"])
        if number == self.checkpoint_entries:
            self.hashes[number] = parsed.entry_hash
        event_type = parsed.event_type
        self.detail.see(parsed)
        self.budgets.see(parsed)
        if self.start <= ts < self.held_until and event_type in SPEND_EVENTS:
            self._sample(parsed)
        if self.start <= ts < self.end:
            self.first = self.first or ts
            self.last = ts
            if event_type in VERDICT_EVENTS:
                self._verdict(parsed)
            elif event_type == "budget.reconcile":
                self._reconcile(parsed)

    def _sample(self, parsed: "ParsedEntry") -> None:
        usd = self.data["usd"]
        payload: Any = parsed.payload
        if parsed.event_type == "budget.record_call" and isinstance(payload, dict):
            provider = payload.get("provider")
            # The fold notes a record's time on the day it counted on.
            if usd["last_spend"].get(self.day, {}).get(provider) == parsed.ts_utc:
                self.records[scope_key(provider)] += 1
                self.records[AGGREGATE] += 1
                self.detail.record(parsed)
        moment = parse_ts(parsed.ts_utc)
        for provider in scope_names(usd, self.day, self.config):
            local = scope_state(usd, provider, 0, self.day, moment).local_micros
            points = self.series.setdefault(scope_key(provider), [(self.start, 0)])
            if points[-1][1] != local:
                points.append((parsed.ts_utc, local))

    def _verdict(self, parsed: "ParsedEntry") -> None:
        payload: Any = parsed.payload  # another writer's entry may hold anything
        if not isinstance(payload, dict):
            payload = {}
        outcome = VERDICT_EVENTS[parsed.event_type]
        reason = payload.get("uncertainty_reason")
        reason = reason if isinstance(reason, str) else None
        self.verdicts[outcome, reason] += 1
        if outcome.halts:
            self.halts.append(
                {
                    "ts_utc": parsed.ts_utc,
                    "verdict": outcome,
                    "uncertainty_reason": reason,
                    "provider": payload.get("provider"),
                    "deciding_cap": payload.get("deciding_cap"),
                    "entry_hash": parsed.entry_hash,
                }
            )

    def _reconcile(self, parsed: "ParsedEntry") -> None:
        checked = check_entry(parsed.event_type, parsed.ts_utc, parsed.payload, self.schema_for)
        if not isinstance(checked, Foldable):
            return
        body = checked.payload
        forced = bool(body.get("forced"))
        billing = body.get("billing_micros")
        rebase = billing - body["counter_micros"] if forced and billing is not None else None
        self.reconciles.append(
            {
                "ts_utc": parsed.ts_utc,
                "provider": body["provider"],
                "counter_micros": body["counter_micros"],
                "billing_micros": billing,
                "drift_pct": body.get("drift_pct"),
                "threshold_pct": body.get("threshold_pct"),
                "blocking": bool(body.get("blocking")) and not forced,
                "billing_api_unreachable": bool(body.get("billing_api_unreachable")),
                "forced": forced,
                "force_reason": body.get("force_reason"),
                "rebase_micros": rebase,
            }
        )
