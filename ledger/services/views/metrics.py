"""The figures ``ledger metrics`` exposes (SPEC §10), gathered without writing anything.

Per scope (the aggregate and each provider with a sub-cap): used, reserved, cap
and usage % from the gate's own read-only ``usage`` (derived state, caught up
as a verdict would). From one pass over the chain's lines: the entry count,
today's verdicts by outcome and uncertainty reason, and the newest snapshot's
time, and today's records whose usage reported what has no price here. Today
is the budget day (``usd.day_timezone``), which spans at most two
UTC dates: only lines of those dates (and snapshot entries) are parsed; the
rest are counted by their bytes.

No such pass is made when the derived state (caught up by ``usage``) is
trusted: the entry count, the newest snapshot's time and today's verdicts and
unpriced usage are the state's own (``ledger.core.day_counts``), so
``metrics`` reads no chain line whatever the chain's length. A state kept
before it counted today's verdicts (or whose newest day is later than today)
has today's lines read, found by bisecting the chain on ``ts_utc`` to today's
start (less the clock tolerance, a chain this product wrote never stepping
back further). An untrusted state, or one folded before it kept the
snapshot's time, falls back to the pass over every line.
"""

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ledger.core.day_counts import KEY as DAY_COUNTS
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.spend import ScopeState
from ledger.core.timefmt import day_bounds, format_ts, parse_ts
from ledger.core.verdict import usage_pct
from ledger.core.verdict_kind import Verdict
from ledger.services.chain.chain_time import bisect_time
from ledger.services.gate.deps import GateDeps
from ledger.services.gate.figures import usage

_TS = re.compile(rb'"ts_utc":"(\d{4}-\d{2}-\d{2})')
_SNAPSHOT = b'"event_type":"ledger.snapshot"'
# Each verdict's chain event, to the verdict (its text where a view prints it).
VERDICT_EVENTS = {verdict.event_type: verdict for verdict in Verdict}


@dataclass(frozen=True, slots=True)
class ScopeFigures:
    """One cap's figures for today."""

    scope: str
    used_micros: int
    reserved_micros: int
    cap_micros: int
    usage_pct: float | None
    drift_pct: float | None
    billing_age_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Metrics:
    """Everything ``ledger metrics`` exposes."""

    utc_day: str
    scopes: list[ScopeFigures]
    verdicts: Counter[tuple[str, str]] = field(default_factory=Counter)
    entries: int = 0
    snapshot_age_seconds: float | None = None
    counter_trusted: bool = True
    budget_day: str | None = None
    budgets: list[dict[str, Any]] = field(default_factory=list)
    # Today's records whose usage reported what has no price here, by what it was.
    unknown_usage: Counter[str] = field(default_factory=Counter)


def _figures(scope: ScopeState, now: dt.datetime) -> ScopeFigures:
    pct = usage_pct(scope)
    drift = scope.reconcile_drift_pct
    reading = scope.reading
    return ScopeFigures(
        scope.key,
        scope.used_micros,
        scope.reserved_micros,
        scope.cap_micros,
        None if pct is None else float(pct),
        None if drift is None else float(drift),
        # Operators alert on this: a bill not read for long means the gate
        # halts near the cap (billing_stale) for want of a reading.
        None if reading is None else max((now - reading.fetched_at).total_seconds(), 0.0),
    )


_RECORD = "budget.record_call"
_UNKNOWN_USAGE = b'"unknown_usage"'


def scan_chain(
    lines: Iterable[bytes], bounds: tuple[str, str], unknown: Counter[str] | None = None
) -> tuple[int, Counter[tuple[str, str]], str | None]:
    """``(entries, the day's verdicts by (outcome, reason), newest snapshot ts)`` of raw lines.

    ``unknown`` (when given) counts the day's records whose usage reported what
    has no price here, by what it was (a usage count, ``service_tier:<tier>``).

    ``bounds`` are the day's first moment and the next day's, in the chain's
    time format (the budget day may span two UTC dates).
    """
    entries = 0
    verdicts: Counter[tuple[str, str]] = Counter()
    newest_snapshot: str | None = None
    start, end = bounds
    wanted = {start[:10].encode(), end[:10].encode()}
    for raw in lines:
        if raw.startswith(b"[") or not raw.endswith(b"\n"):
            continue
        entries += 1
        match = _TS.search(raw)
        is_snapshot = _SNAPSHOT in raw
        if not is_snapshot and (match is None or match.group(1) not in wanted):
            continue
        try:
            parsed = parse_line(raw[:-1])
        except EnvelopeFormatError:
            continue
        if parsed.event_type == "ledger.snapshot":
            newest_snapshot = max(newest_snapshot or "", parsed.ts_utc)
        if (
            unknown is not None and parsed.event_type == _RECORD and _UNKNOWN_USAGE in raw
            and start <= parsed.ts_utc < end
        ):  # fmt: skip
            for name in parsed.payload.get("unknown_usage") or ():
                unknown[str(name)] += 1
        outcome = VERDICT_EVENTS.get(parsed.event_type)
        if outcome is not None and start <= parsed.ts_utc < end:
            reason = parsed.payload.get("uncertainty_reason") or ""
            verdicts[outcome, str(reason)] += 1
    return entries, verdicts, newest_snapshot or None


def _counted_today(
    meta: dict[str, Any], day: str, unknown: Counter[str]
) -> Counter[tuple[str, str]] | None:
    """Today's verdicts as the derived state counted them (``day_counts``); ``None``: it did not.

    ``None`` too when the state's newest day is later than today (a clock
    behind the chain's): the chain is read for today's entries then.
    """
    if DAY_COUNTS not in meta:
        return None  # a state kept before it counted them
    today = meta[DAY_COUNTS]
    verdicts: Counter[tuple[str, str]] = Counter()
    if today is None or today["day"] < day:
        return verdicts  # nothing counted today yet
    if today["day"] > day:
        return None
    for key, count in today["verdicts"].items():
        event_type, _, reason = key.partition("|")
        verdicts[VERDICT_EVENTS[event_type], reason] += int(count)
    for name, count in today["unknown_usage"].items():
        unknown[name] += int(count)
    return verdicts


def _todays_verdicts(
    deps: GateDeps, start: dt.datetime, bounds: tuple[str, str], unknown: Counter[str]
) -> Counter[tuple[str, str]]:
    """Today's verdicts (and unknown usage) from the lines sealed since today began."""
    head = deps.chain.head()
    if head is None:
        return Counter()
    size = head.size
    tolerance = dt.timedelta(seconds=deps.config.clock_tolerance_seconds + 1)
    began = bisect_time(deps.chain, size, format_ts(start - tolerance))
    lines = deps.chain.iter_lines(began, size)
    if began > 0:
        next(lines, None)  # the rest of the line the bisection landed in
    return scan_chain(lines, bounds, unknown)[1]


def gather(deps: GateDeps) -> Metrics:
    """Today's figures; writes nothing.

    Raises:
        ConfigError: the configuration is invalid.
        LockTimeoutError: the chain lock stayed busy.
        ChainIOError: the chain cannot be read.
    """
    config = deps.config
    first = usage(deps, None)
    scopes = [_figures(first.aggregate, first.now)] if first.daily_cap_micros is not None else []
    for provider in sorted(config.provider_caps_micros):
        outcome = usage(deps, provider)
        if outcome.provider_scope is not None:
            scopes.append(_figures(outcome.provider_scope, outcome.now))
    trusted = first.uncertainty is None or first.uncertainty.value != "counter_inconsistent"
    day = first.budget_day or first.utc_day
    start, end = day_bounds(day, config.day_zone)
    bounds = (format_ts(start), format_ts(end))
    unknown: Counter[str] = Counter()
    meta = first.chain_meta
    if deps.chain.exists() and meta is not None and "snapshot_ts" in meta:
        entries, snapshot_ts = int(meta["entries"]), meta["snapshot_ts"]
        counted = _counted_today(meta, day, unknown)
        verdicts = (
            counted if counted is not None else _todays_verdicts(deps, start, bounds, unknown)
        )
    else:
        lines = deps.chain.iter_lines() if deps.chain.exists() else iter(())
        entries, verdicts, snapshot_ts = scan_chain(lines, bounds, unknown)
    age = None
    if snapshot_ts is not None:
        age = max((first.now - parse_ts(snapshot_ts)).total_seconds(), 0.0)
    budgets = []
    if config.budgets:
        from ledger.services.gate.budget_views import budget_rows

        budgets = budget_rows(deps)["budgets"]
    return Metrics(
        first.utc_day, scopes, verdicts, entries, age, trusted, budget_day=day, budgets=budgets,
        unknown_usage=unknown,
    )  # fmt: skip
