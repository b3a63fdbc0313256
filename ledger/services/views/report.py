"""One budget day for ``ledger report`` (SPEC §10), drawn from the verified chain.

The day's part of the chain (found through the rollups: ``report_window``) is
verified and folded with the gate's own fold, so every figure is the counter
the gate saw at that moment: after each entry that can
move the day's spend (a record, a forced reconcile's re-base, prices sealed by
``rebuild-state``), every scope's counter is sampled, which gives the
cumulative series. Verdicts and reconciles sealed during the day are tallied
from their entries.

A chain that does not verify, or that disagrees with the newest checkpoint in
the home, is an error (exit 1): a report is never drawn from a chain the gate
would refuse. Damage the gate turns into a halt (an entry it cannot fold, a
negative amount, a timestamp that steps back, unpriced spend) is reported as
that halt, with the gate's diagnostic.

The fold keeps the current and the previous budget day only, so a day's
figures are read at the last moment the fold still holds it (before the first
entry two days later); spend can reach a day only until then (a record that
settles a reservation made before midnight).
"""

import datetime as dt
from collections import Counter as Tally
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ledger.core.chain import ChainVerifier
from ledger.core.seal import chain_time
from ledger.core.spend import scope_state, unpriced_problem
from ledger.core.timefmt import budget_day, day_bounds, format_ts
from ledger.core.units import percent
from ledger.errors import ChainBrokenError, LedgerError
from ledger.services.chain.counter import Counter, checkpoint_problem, counter_problem
from ledger.services.chain.schema_lookup import schema_lookup
from ledger.services.ports import CounterDeps
from ledger.services.views.report_walk import DayWalk, scope_key, scope_names
from ledger.services.views.report_window import DayReportDeps, walk_window

if TYPE_CHECKING:
    from ledger.core.checkpoint import Checkpoint
    from ledger.core.config import Config
    from ledger.core.trust import TrustStore
    from ledger.services.ports import Clock, Head


class ReportDeps(CounterDeps, Protocol):
    """What a report needs: the chain, its trust, the configuration and the clock."""

    @property
    def config(self) -> "Config":
        """The configuration in force now."""
        ...

    @property
    def clock(self) -> "Clock":
        """The time now."""
        ...


class CheckpointDisagreesError(LedgerError):
    """The chain is shorter than, or differs from, the newest checkpoint (exit 1)."""


@dataclass(frozen=True, slots=True)
class ScopeDay:
    """One cap's scope over the day."""

    scope: str
    cap_micros: int | None
    counter_micros: int
    billing_micros: int | None
    reserved_micros: int
    records: int
    series: list[tuple[str, int]]

    @property
    def used_micros(self) -> int:
        """The larger of the counter and the day's bill, as the gate counts it."""
        if self.billing_micros is None:
            return self.counter_micros
        return max(self.counter_micros, self.billing_micros)

    def to_document(self) -> dict[str, Any]:
        """The JSON form."""
        cap = self.cap_micros
        used, reserved = self.used_micros, self.reserved_micros
        pct = None if not cap else f"{float(percent(used + reserved, cap)):.4f}"
        return {
            "scope": self.scope,
            "cap_micros": cap,
            "counter_micros": self.counter_micros,
            "billing_micros": self.billing_micros,
            "used_micros": used,
            "reserved_micros": reserved,
            "remaining_micros": None if cap is None else cap - used - reserved,
            "usage_pct": pct,
            "records": self.records,
            "series": [[ts, micros] for ts, micros in self.series],
        }


@dataclass(frozen=True, slots=True)
class DayReport:
    """Everything ``ledger report`` shows for one budget day."""

    day: str
    timezone: str
    start: dt.datetime
    end: dt.datetime
    now: dt.datetime
    entries: int
    scopes: list[ScopeDay]
    verdicts: Tally[tuple[str, str | None]]
    halts: list[dict[str, Any]]
    reconciles: list[dict[str, Any]]
    unpriced_calls: int
    problem: str | None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_document(self) -> dict[str, Any]:
        """The JSON form (money in integer micro-USD)."""
        by_outcome: Tally[str] = Tally()
        for (outcome, _reason), count in self.verdicts.items():
            by_outcome[outcome] += count
        return {
            "budget_day": self.day,
            "timezone": self.timezone,
            "day_start": format_ts(self.start),
            "day_end": format_ts(self.end),
            "generated_at": format_ts(self.now),
            "entries": self.entries,
            "counter": {
                "trusted": self.problem is None,
                "uncertainty_reason": None if self.problem is None else "counter_inconsistent",
                "diagnostic": self.problem,
            },
            "scopes": [scope.to_document() for scope in self.scopes],
            "verdicts": {
                "total": sum(self.verdicts.values()),
                "by_outcome": dict(sorted(by_outcome.items())),
                "by_reason": [
                    {"verdict": outcome, "uncertainty_reason": reason, "count": count}
                    for (outcome, reason), count in sorted(
                        self.verdicts.items(), key=lambda item: (item[0][0], item[0][1] or "")
                    )
                ],
            },
            "halts": self.halts,
            "reconciles": self.reconciles,
            "unpriced_calls": self.unpriced_calls,
            **self.extra,
        }


def _summaries(
    walk: DayWalk, usd: dict[str, Any], now: dt.datetime, config: "Config"
) -> list[ScopeDay]:
    day = walk.day
    scopes = []
    for provider in scope_names(usd, day, config):
        cap = (
            config.daily_cap_micros
            if provider is None
            else config.provider_caps_micros.get(provider)
        )
        figures = scope_state(usd, provider, cap or 0, day, now, walk.zone)
        key = scope_key(provider)
        scopes.append(
            ScopeDay(
                key,
                cap,
                figures.local_micros,
                figures.billing_micros,
                figures.reserved_micros,
                walk.records[key],
                walk.series.get(key, [(walk.start, 0)]),
            )
        )
    return scopes


def gather(
    deps: DayReportDeps, day: str | None, by: str | None = None, *, whole_chain: bool = False
) -> DayReport:
    """The report of budget day ``day`` (``YYYY-MM-DD``; ``None``: today); writes nothing.

    Budget days in ``usd.day_timezone`` (SPEC §10); ``by`` (``BREAKDOWN_KEYS``)
    adds a breakdown. Only the part of the chain the day depends on is read,
    found through the rollups (``report_window``); ``whole_chain``: from line 1.

    Raises:
        ChainBrokenError: the chain does not verify (names the first bad line).
        CheckpointDisagreesError: the chain is cut or differs from its newest checkpoint.
        ConfigError: the configuration is invalid.
        LockTimeoutError: the chain lock stayed busy.
        ChainIOError: the chain cannot be read.
    """
    config = deps.config
    zone = config.day_zone
    with deps.chain.read_transaction() as tx:
        local_now = deps.clock.now()
        head = tx.head()
    now = chain_time(local_now, head.ts_utc if head is not None else None)
    day = day or budget_day(now, zone)
    trust = deps.keys.load_trust()
    checkpoint = deps.newest_checkpoint() if whole_chain else None
    walk = DayWalk(
        day, zone, config, schema_lookup(deps), checkpoint.entries if checkpoint else None, by
    )
    if whole_chain:
        entries, problem = _walk_whole(deps, walk, head, trust, checkpoint)
    else:
        entries, problem = walk_window(deps, walk, day, zone, config)
    usd = walk.usd_held if walk.usd_held is not None else walk.data["usd"]
    if walk.readings_at_end is not None:
        usd = {**usd, "readings": walk.readings_at_end}
    unpriced = sum(1 for rec in (usd.get("unpriced") or {}).values() if rec["budget_day"] == day)
    problem = problem or unpriced_problem(usd, day)
    start, end = day_bounds(day, zone)
    return DayReport(
        day=day,
        timezone=config.day_timezone,
        start=start,
        end=end,
        now=now,
        entries=entries,
        scopes=_summaries(walk, usd, now, config),
        verdicts=walk.verdicts,
        halts=walk.halts,
        reconciles=walk.reconciles,
        unpriced_calls=unpriced,
        problem=problem,
        extra={
            "first_entry_ts": walk.first,
            "last_entry_ts": walk.last,
            "bill_readings": walk.detail.readings,
            "breakdown": walk.detail.breakdown(),
            "budgets": walk.budgets.document(now, walk.halts),
        },
    )


def _walk_whole(
    deps: ReportDeps,
    walk: DayWalk,
    head: "Head | None",
    trust: "TrustStore",
    checkpoint: "Checkpoint | None",
) -> tuple[int, str | None]:
    """Verify and fold every entry; the entries and why the counter is untrusted."""
    if head is not None:
        verifier = ChainVerifier(trust, on_entry=walk)
        for raw in deps.chain.iter_lines(0, head.size):
            if not verifier.feed(raw):
                break
        report = verifier.report()
        if not report.ok:
            raise ChainBrokenError(report.line or 0, report.reason or "does not verify")
    if checkpoint is not None:
        problem = checkpoint_problem(walk.data, head, checkpoint, walk.hashes, trust)
        if problem is not None:
            raise CheckpointDisagreesError(f"the chain does not verify: {problem}")
    return int(walk.data["meta"]["entries"]), counter_problem(Counter(walk.data, head), deps.config)
