"""The budget gate as a pure function: SPEC §4's table, first matching row wins.

``decide`` takes everything it needs as values — the scopes' figures, the
chain's newest timestamp, any problem found while loading the counter, the
configuration and ``now`` — and returns a ``Decision``. It never returns
``allow`` or ``warn-90`` while any uncertainty holds.
"""

import datetime as dt
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

from ledger.core.config import Config
from ledger.core.spend import ScopeState
from ledger.core.verdict_kind import Uncertainty, Verdict

# The gate's answer kinds live in ``verdict_kind`` (cheap to import); they are
# named here too, beside ``decide``, for the modules that import them from here.
__all__ = [
    "Decision",
    "Uncertainty",
    "Verdict",
    "decide",
    "deciding_scope",
    "usage_pct",
]


class Decision(NamedTuple):
    """The gate's answer with its reason and the deciding scope's figures."""

    verdict: Verdict
    reason: Uncertainty | None
    diagnostic: str | None
    deciding: ScopeState
    estimate_micros: int
    projected_pct: Fraction | None

    @property
    def admits(self) -> bool:
        """Whether the call may proceed."""
        return self.verdict.admits


def usage_pct(scope: ScopeState, extra_micros: int = 0) -> Fraction | None:
    """``100 × (used + reserved + extra) / cap``; ``None`` when the cap is 0."""
    if scope.cap_micros == 0:
        return None
    return Fraction(
        100 * (scope.used_micros + scope.reserved_micros + extra_micros), scope.cap_micros
    )


def _rank(scope: ScopeState, estimate: int) -> tuple[int, int]:
    """The projected % as numerator and positive denominator; a zero cap as 10^30."""
    cap = scope.cap_micros
    if cap == 0:
        return 10**30, 1
    over = 100 * (scope.used_micros + scope.reserved_micros + estimate)
    return (over, cap) if cap > 0 else (-over, -cap)


def deciding_scope(scopes: list[ScopeState], estimate_micros: int) -> ScopeState:
    """The scope with the highest projected % (a zero cap outranks all; ties keep order)."""
    # Compared as integers, crossed over: exactly as the fractions compare, with
    # no Fraction built for each of a verdict's budgets.
    best = scopes[0]
    best_over, best_under = _rank(best, estimate_micros)
    for scope in scopes[1:]:
        over, under = _rank(scope, estimate_micros)
        if over * best_under > best_over * under:
            best, best_over, best_under = scope, over, under
    return best


def _seconds(delta: dt.timedelta) -> float:
    return delta.total_seconds()


# A reconcile cannot read a bill no observer fetches: name both ways out.
_NO_OBSERVER = (
    "; no billing observer is configured: set [observer] command in ledger.toml, or count "
    "ledger's own records only with billing.stale_halt_pct = 100 (`ledger init --billing none`)"
)


def _near_cap(scope: ScopeState, config: Config) -> bool:
    pct = usage_pct(scope)
    return pct is not None and pct > config.stale_halt_pct


def _uncertainty(
    scopes: list[ScopeState],
    config: Config,
    now: dt.datetime,
    head_ts: dt.datetime | None,
    counter_problem: str | None,
    local_now: dt.datetime,
) -> tuple[Uncertainty, str] | None:
    if counter_problem is not None:
        return Uncertainty.COUNTER_INCONSISTENT, counter_problem
    for scope in scopes:
        if scope.reconcile_blocking:
            return (
                Uncertainty.COUNTER_DRIFT,
                (
                    f"{scope.key}: last reconcile found drift {scope.reconcile_drift_pct}% > "
                    f"{float(config.drift_threshold_pct):g}%; reconcile again or "
                    "`ledger reconcile --force-reason`"
                ),
            )
    for scope in scopes:
        if not _near_cap(scope, config):
            continue
        reading = scope.reading
        if reading is None or _seconds(now - reading.fetched_at) > config.stale_seconds:
            last = (
                "no billing reading yet"
                if reading is None
                else "the last successful billing reading was fetched "
                f"{_seconds(now - reading.fetched_at):.0f} s ago"
            )
            return (
                Uncertainty.BILLING_STALE,
                (
                    f"{scope.key}: usage above {float(config.stale_halt_pct):g}% and {last} "
                    f"(limit {config.stale_seconds} s)"
                    f"{_NO_OBSERVER if config.observer_command is None else ''}"
                ),
            )
    for scope in scopes:
        reading = scope.reading
        if not _near_cap(scope, config) or reading is None:
            continue
        lag = _seconds(reading.fetched_at - reading.billing_ts)
        if lag >= config.provider_lag_seconds:
            return (
                Uncertainty.PROVIDER_LAG,
                (
                    f"{scope.key}: billing data is {lag:.0f} s behind its fetch time "
                    f"(limit {config.provider_lag_seconds} s)"
                ),
            )
    tolerance = config.clock_tolerance_seconds
    for scope in scopes:
        reading = scope.reading
        if reading is None:
            continue
        if reading.server_ts is not None:
            skew = abs(_seconds(reading.fetched_at - reading.server_ts))
            if skew > tolerance:
                return (
                    Uncertainty.CLOCK_DRIFT,
                    (
                        f"{scope.key}: local clock and provider clock differ by {skew:.0f} s "
                        f"(tolerance {tolerance} s)"
                    ),
                )
        ahead = _seconds(reading.billing_ts - reading.fetched_at)
        if ahead > tolerance:
            return (
                Uncertainty.CLOCK_DRIFT,
                f"{scope.key}: billing_ts is {ahead:.0f} s in the future (tolerance {tolerance} s)",
            )
    if head_ts is not None and _seconds(head_ts - local_now) > tolerance:
        return (
            Uncertainty.CLOCK_DRIFT,
            (
                f"local time {local_now.strftime('%Y-%m-%dT%H:%M:%S.%fZ')} is "
                f"{_seconds(head_ts - local_now):.0f} s before the chain's newest entry "
                f"(tolerance {tolerance} s)"
            ),
        )
    return None


def decide(
    scopes: list[ScopeState],
    estimate_micros: int,
    config: Config,
    now: dt.datetime,
    *,
    head_ts: dt.datetime | None = None,
    counter_problem: str | None = None,
    local_now: dt.datetime | None = None,
    budget_scopes: Sequence[tuple[ScopeState, Fraction]] = (),
) -> Decision:
    """Answer one pre-call check.

    Args:
        scopes: the applicable caps' scopes (aggregate first, then the provider's).
        estimate_micros: the call's estimated cost (≥ 0).
        config: thresholds.
        now: the time the step decides at (aware): the chain's time, which is
            the local clock but never before the head (``seal.chain_time``).
        head_ts: the chain's newest entry time.
        local_now: the local clock itself, when it differs from ``now``: row 5
            compares it with the head (defaults to ``now``).
        counter_problem: why the local counter cannot be trusted, if it cannot.
        budget_scopes: the applicable ``[[budgets]]``' scopes, each with its
            warn threshold; they act on rows 6 and 7 only (the bill has no
            per-budget view, so the uncertainty rows stay with the caps).
    """
    capped = [(scope, config.warn_pct) for scope in scopes] + list(budget_scopes)
    deciding = deciding_scope([scope for scope, _warn in capped], estimate_micros)
    projected = usage_pct(deciding, estimate_micros)
    uncertain = _uncertainty(
        scopes, config, now, head_ts, counter_problem, now if local_now is None else local_now
    )
    if uncertain is not None:
        reason, diagnostic = uncertain
        return Decision(
            Verdict.HALT_UNCERTAINTY, reason, diagnostic, deciding, estimate_micros, projected
        )
    verdict = Verdict.ALLOW
    for scope, warn_pct in capped:
        # ``usage_pct`` against 100 and ``warn_pct`` as integers, crossed over.
        over, under = _rank(scope, estimate_micros)
        if scope.cap_micros == 0 or over >= 100 * under:
            verdict = Verdict.HALT_100
            break
        if over * warn_pct.denominator >= warn_pct.numerator * under:
            verdict = Verdict.WARN_90
    return Decision(verdict, None, None, deciding, estimate_micros, projected)
