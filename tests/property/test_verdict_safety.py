"""Property: the gate never admits a call under any uncertainty, and halts are monotone."""

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from ledger.core.config import Config
from ledger.core.spend import Reading, ScopeState
from ledger.core.verdict import Uncertainty, Verdict, decide

NOW = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.UTC)
USD = 1_000_000

micros = st.integers(min_value=0, max_value=500 * USD)
offsets = st.integers(min_value=-7200, max_value=7200)


@st.composite
def readings(draw):
    if draw(st.booleans()):
        return None
    fetched = NOW - dt.timedelta(seconds=draw(st.integers(0, 7200)))
    billing = fetched - dt.timedelta(seconds=draw(offsets))
    server = None if draw(st.booleans()) else fetched + dt.timedelta(seconds=draw(offsets))
    return Reading(draw(micros), billing, server, fetched)


@st.composite
def scopes(draw, key):
    billing = draw(st.none() | micros)
    return ScopeState(
        key=key,
        cap_micros=draw(st.integers(0, 200 * USD)),
        local_micros=draw(micros),
        billing_micros=billing,
        reserved_micros=draw(micros),
        last_spend_ts=None,
        reading=draw(readings()),
        reconcile_blocking=draw(st.booleans()),
        reconcile_drift_pct=None,
    )


configs = st.builds(
    Config,
    daily_cap_micros=st.just(100 * USD),
    warn_pct=st.fractions(0, 100),
    stale_halt_pct=st.fractions(0, 100),
    stale_seconds=st.integers(0, 3600),
    provider_lag_seconds=st.integers(0, 3600),
    clock_tolerance_seconds=st.integers(0, 600),
)


def expected_uncertainty(all_scopes, config, head_ts, problem):
    """An independent restatement of SPEC §4 rows 1–5."""
    if problem:
        return Uncertainty.COUNTER_INCONSISTENT
    if any(s.reconcile_blocking for s in all_scopes):
        return Uncertainty.COUNTER_DRIFT

    def near(s):
        return s.cap_micros > 0 and 100 * (s.used_micros + s.reserved_micros) > (
            config.stale_halt_pct * s.cap_micros
        )

    for s in all_scopes:
        if near(s) and (
            s.reading is None or (NOW - s.reading.fetched_at).total_seconds() > config.stale_seconds
        ):
            return Uncertainty.BILLING_STALE
    for s in all_scopes:
        if near(s) and s.reading is not None:
            lag = (s.reading.fetched_at - s.reading.billing_ts).total_seconds()
            if lag >= config.provider_lag_seconds:
                return Uncertainty.PROVIDER_LAG
    tol = config.clock_tolerance_seconds
    for s in all_scopes:
        r = s.reading
        if r is None:
            continue
        if r.server_ts is not None and abs((r.fetched_at - r.server_ts).total_seconds()) > tol:
            return Uncertainty.CLOCK_DRIFT
        if (r.billing_ts - r.fetched_at).total_seconds() > tol:
            return Uncertainty.CLOCK_DRIFT
    if head_ts is not None and (head_ts - NOW).total_seconds() > tol:
        return Uncertainty.CLOCK_DRIFT
    return None


@given(
    aggregate=scopes("aggregate"),
    provider=st.none() | scopes("provider:openai"),
    estimate=micros,
    config=configs,
    head_offset=st.none() | offsets,
    problem=st.none() | st.sampled_from(["torn tail", "state mismatch"]),
)
def test_never_admits_under_uncertainty_and_reports_the_first_row(
    aggregate, provider, estimate, config, head_offset, problem
):
    """Whatever holds, an uncertain counter is never allow/warn, and the first row wins."""
    all_scopes = [aggregate] if provider is None else [aggregate, provider]
    head_ts = None if head_offset is None else NOW + dt.timedelta(seconds=head_offset)
    decision = decide(all_scopes, estimate, config, NOW, head_ts=head_ts, counter_problem=problem)
    expected = expected_uncertainty(all_scopes, config, head_ts, problem)
    if expected is not None:
        assert decision.verdict is Verdict.HALT_UNCERTAINTY
        assert decision.reason is expected
        assert not decision.admits
    else:
        assert decision.reason is None
        over = any(
            s.cap_micros == 0 or s.used_micros + s.reserved_micros + estimate >= s.cap_micros
            for s in all_scopes
        )
        assert (decision.verdict is Verdict.HALT_100) is over


@given(aggregate=scopes("aggregate"), low=micros, extra=micros, config=configs)
def test_a_larger_estimate_never_turns_a_halt_into_an_admission(aggregate, low, extra, config):
    """Monotone in spend: if an estimate halts, every larger estimate halts too."""
    small = decide([aggregate], low, config, NOW)
    large = decide([aggregate], low + extra, config, NOW)
    if not small.admits:
        assert not large.admits
