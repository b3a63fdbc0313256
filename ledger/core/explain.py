"""SPEC §4's table row by row, for ``ledger explain`` (SPEC §10).

``decide`` stops at the first matching row; an explanation shows every row and
whether it matched, so each predicate here is the same test ``decide`` makes,
taken on its own. ``first_match`` must agree with ``decide``; the tests hold
them to it.
"""

import datetime as dt
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NamedTuple

from ledger.core.config import Config
from ledger.core.spend import ScopeState
from ledger.core.verdict import usage_pct


class RowCheck(NamedTuple):
    """One row of SPEC §4 and whether it matched."""

    order: int
    outcome: str
    reason: str | None
    matched: bool
    detail: str


def _near(scope: ScopeState, config: Config) -> bool:
    pct = usage_pct(scope)
    return pct is not None and pct > config.stale_halt_pct


def _secs(delta: dt.timedelta) -> float:
    return delta.total_seconds()


def _stale(scope: ScopeState, config: Config, now: dt.datetime) -> bool:
    reading = scope.reading
    return _near(scope, config) and (
        reading is None or _secs(now - reading.fetched_at) > config.stale_seconds
    )


def _lagging(scope: ScopeState, config: Config) -> bool:
    reading = scope.reading
    return (
        _near(scope, config)
        and reading is not None
        and _secs(reading.fetched_at - reading.billing_ts) >= config.provider_lag_seconds
    )


def _clock_off(scope: ScopeState, config: Config) -> bool:
    reading = scope.reading
    if reading is None:
        return False
    tolerance = config.clock_tolerance_seconds
    if reading.server_ts is not None and abs(_secs(reading.fetched_at - reading.server_ts)) > (
        tolerance
    ):
        return True
    return _secs(reading.billing_ts - reading.fetched_at) > tolerance


def _names(scopes: list[ScopeState]) -> str:
    return ", ".join(scope.key for scope in scopes) or "none"


def _warn_detail(
    capped: Sequence[tuple[ScopeState, Fraction]], warn: list[ScopeState], default: Fraction
) -> str:
    """Row 7 in words: each threshold with the scopes it matched, or the thresholds none did.

    ``projected ≥ 80 % under warn_pct = 80: budget:team`` names the threshold
    itself, as each budget may set its own ``warn_pct``.
    """
    matched = {scope.key for scope in warn}
    thresholds = sorted({w for _s, w in capped} | {default})
    parts = []
    for threshold in thresholds:
        keys = [s.key for s, w in capped if w == threshold and s.key in matched]
        if keys or not matched:
            pct = f"{float(threshold):g}"
            parts.append(f"projected ≥ {pct} % under warn_pct = {pct}: {', '.join(keys) or 'none'}")
    return "; ".join(parts)


def table_rows(
    scopes: list[ScopeState],
    estimate_micros: int,
    config: Config,
    now: dt.datetime,
    *,
    head_ts: dt.datetime | None,
    counter_problem: str | None,
    local_now: dt.datetime,
    budget_scopes: Sequence[tuple[ScopeState, Fraction]] = (),
) -> list[RowCheck]:
    """Every row of the verdict table in order, each tested on its own (budgets on rows 6, 7)."""
    drift = [s for s in scopes if s.reconcile_blocking]
    stale = [s for s in scopes if _stale(s, config, now)]
    lag = [s for s in scopes if _lagging(s, config)]
    clock = [s for s in scopes if _clock_off(s, config)]
    tolerance = config.clock_tolerance_seconds
    behind = head_ts is not None and _secs(head_ts - local_now) > tolerance
    capped = [(s, config.warn_pct) for s in scopes] + list(budget_scopes)
    projected = {s.key: usage_pct(s, estimate_micros) for s, _w in capped}
    full = [s for s, _w in capped if (p := projected[s.key]) is None or p >= 100]  # noqa: PLR2004
    warn = [s for s, w in capped if (p := projected[s.key]) is not None and p >= w]
    return [
        RowCheck(1, "halt-uncertainty", "counter_inconsistent", counter_problem is not None,
                 counter_problem or "the chain verifies and folds up to this verdict"),
        RowCheck(2, "halt-uncertainty", "counter_drift", bool(drift),
                 f"scopes whose newest reconcile blocks: {_names(drift)}"),
        RowCheck(3, "halt-uncertainty", "billing_stale", bool(stale),
                 f"above {float(config.stale_halt_pct):g}% with no reading within "
                 f"{config.stale_seconds} s: {_names(stale)}"),
        RowCheck(4, "halt-uncertainty", "provider_lag", bool(lag),
                 f"above {float(config.stale_halt_pct):g}% with billing >= "
                 f"{config.provider_lag_seconds} s behind its fetch: {_names(lag)}"),
        RowCheck(5, "halt-uncertainty", "clock_drift", bool(clock) or behind,
                 f"provider clock off by > {tolerance} s: {_names(clock)}; local clock before "
                 f"the chain's newest entry by > {tolerance} s: {'yes' if behind else 'no'}"),
        RowCheck(6, "halt-100", None, bool(full),
                 f"projected >= 100% or a zero cap: {_names(full)}"),
        RowCheck(7, "warn-90", None, bool(warn), _warn_detail(capped, warn, config.warn_pct)),
        RowCheck(8, "allow", None, True, "otherwise"),
    ]  # fmt: skip


def first_match(rows: list[RowCheck]) -> RowCheck:
    """The row that decides: the first that matched."""
    return next(row for row in rows if row.matched)


def pct_text(pct: Fraction | None) -> str | None:
    """A percentage as payloads print it (4 decimals), ``None`` for a zero cap."""
    return None if pct is None else f"{float(pct):.4f}"


def scope_figures(scope: ScopeState, estimate_micros: int) -> dict[str, Any]:
    """One cap's figures as the verdict saw them."""
    return {
        "scope": scope.key,
        "cap_micros": scope.cap_micros,
        "used_micros": scope.used_micros,
        "local_micros": scope.local_micros,
        "billing_micros": scope.billing_micros,
        "reserved_micros": scope.reserved_micros,
        "estimate_micros": estimate_micros,
        "usage_pct": pct_text(usage_pct(scope)),
        "projected_pct": pct_text(usage_pct(scope, estimate_micros)),
    }
