"""Property: the output limit the clamp finds never takes a cap past 100 %, and is the most that fits."""

import datetime as dt
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.config import Config
from ledger.core.output_fit import OutputFit, output_tokens_that_fit, room_micros
from ledger.core.prices import Quote, Rates, Tier, quote_estimate_micros
from ledger.core.spend import ScopeState
from ledger.core.verdict import decide

NOW = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.UTC)
USD = 1_000_000
CONFIG = Config(daily_cap_micros=100 * USD, stale_halt_pct=Fraction(100))

rates = st.fractions(min_value=0, max_value=100, max_denominator=1000)


@st.composite
def quotes(draw):
    def one():
        return Rates(draw(rates), draw(rates), Fraction(0), Fraction(0), Fraction(0))

    tiers = (Tier(draw(st.integers(0, 300_000)), one()),) if draw(st.booleans()) else ()
    return Quote("anthropic", "m", one(), "test", tiers)


@st.composite
def scopes(draw, key):
    """A cap with part of it used and reserved (now and then more than all of it)."""
    cap = draw(st.integers(0, 5 * USD))
    local = draw(st.integers(0, cap + 1000))
    return ScopeState(
        key=key,
        cap_micros=cap,
        local_micros=local,
        billing_micros=None,
        reserved_micros=draw(st.integers(0, max(0, cap - local) + 1000)),
        last_spend_ts=None,
        reading=None,
        reconcile_blocking=False,
        reconcile_drift_pct=None,
    )


@st.composite
def fits(draw):
    """A request of ``step`` choices: its limit and the least output are per choice × step."""
    step = draw(st.integers(1, 4))
    return OutputFit(
        input_tokens=draw(st.integers(0, 400_000)),
        requested=step * draw(st.integers(1, 64_000)),
        min_output=step * draw(st.integers(1, 4096)),
        quote=draw(quotes()),
        step=step,
        # Server-side tool fees: a fixed part of the estimate the clamp cannot lower.
        extra_micros=draw(st.sampled_from([0, 0, 10_000, 50_000, 2_000_000])),
    )


every_scope = st.lists(scopes("budget:b"), min_size=0, max_size=3)


def _estimate(fit: OutputFit, tokens: int) -> int:
    return quote_estimate_micros(fit.input_tokens, tokens, fit.quote)[0] + fit.extra_micros


def _admits(caps: list[ScopeState], budgets: list[ScopeState], estimate: int) -> bool:
    budget_scopes = [(scope, Fraction(90)) for scope in budgets]
    return decide(caps, estimate, CONFIG, NOW, budget_scopes=budget_scopes).admits


@settings(max_examples=500)
@given(fit=fits(), aggregate=scopes("aggregate"), provider=scopes("provider:anthropic"),
       budgets=every_scope)  # fmt: skip
def test_never_over_any_cap_and_always_the_most_that_fits(fit, aggregate, provider, budgets):
    """What the clamp finds is admitted by the verdict; one step more is not (or is the ask)."""
    caps = [aggregate, provider]
    rooms = [room_micros(scope) for scope in [*caps, *budgets]]
    found = output_tokens_that_fit(rooms, fit)
    floor = min(fit.requested, fit.min_output)
    if found is None:
        # Not even the least useful answer fits: the verdict at it halts.
        assert not _admits(caps, budgets, _estimate(fit, floor))
        return
    assert floor <= found <= fit.requested
    assert found % fit.step == 0
    assert _admits(caps, budgets, _estimate(fit, found))
    if found < fit.requested:
        assert not _admits(caps, budgets, _estimate(fit, found + fit.step))


@given(fit=fits())
def test_a_request_that_fits_keeps_its_limit(fit):
    """With room to spare the limit is the one asked for."""
    room = _estimate(fit, fit.requested) + 1
    assert output_tokens_that_fit([room, room * 2], fit) == fit.requested
