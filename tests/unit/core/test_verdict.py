"""SPEC §4, row by row and at every boundary, through the pure ``decide``."""

import datetime as dt
import json
from fractions import Fraction

import pytest

from ledger.core.config import Config
from ledger.core.spend import Reading, ScopeState
from ledger.core.verdict import Uncertainty, Verdict, decide, deciding_scope, usage_pct

NOW = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.UTC)
USD = 1_000_000
CONFIG = Config(daily_cap_micros=100 * USD)


def reading(age: float = 0, lag: float = 0, server_skew: float | None = 0, usd: int = 0) -> Reading:
    fetched = NOW - dt.timedelta(seconds=age)
    server = None if server_skew is None else fetched + dt.timedelta(seconds=server_skew)
    return Reading(usd, fetched - dt.timedelta(seconds=lag), server, fetched)


def scope(
    used: float = 0,
    reserved: float = 0,
    cap: float = 100,
    billing: float | None = None,
    rd: Reading | None = None,
    blocking: bool = False,
    key: str = "aggregate",
) -> ScopeState:
    return ScopeState(
        key=key,
        cap_micros=int(cap * USD),
        local_micros=int(used * USD),
        billing_micros=None if billing is None else int(billing * USD),
        reserved_micros=int(reserved * USD),
        last_spend_ts=None,
        reading=rd,
        reconcile_blocking=blocking,
        reconcile_drift_pct="7.0000" if blocking else None,
    )


def run(scopes, estimate: float = 1, config: Config = CONFIG, **kwargs):
    return decide(list(scopes), int(estimate * USD), config, NOW, **kwargs)


class TestCaps:
    """Rows 6–8: halt-100, warn-90, allow on projected % of any cap."""

    @pytest.mark.parametrize(
        ("used", "estimate", "expected"),
        [
            (0, 1, Verdict.ALLOW),
            (88, 1, Verdict.ALLOW),
            (88.999999, 1, Verdict.ALLOW),
            (89, 1, Verdict.WARN_90),
            (98, 1, Verdict.WARN_90),
            (98.999999, 1, Verdict.WARN_90),
            (99, 1, Verdict.HALT_100),
            (100, 0, Verdict.HALT_100),
            (150, 0, Verdict.HALT_100),
        ],
    )
    def test_boundaries(self, used, estimate, expected):
        """warn-90 at exactly 90 % projected, halt-100 at exactly 100 %."""
        fresh = reading()
        assert run([scope(used, rd=fresh)], estimate).verdict is expected

    def test_hundredth_dollar_call_halts(self):
        """A $100 cap admits 99 calls of $1: the 100th would reach 100 %."""
        admitted = 0
        reserved = 0
        for _ in range(150):
            decision = run([scope(reserved=reserved, rd=reading())], 1)
            if decision.admits:
                admitted += 1
                reserved += 1
        assert admitted == 99

    def test_zero_cap_halts_even_a_free_call(self):
        """An applicable cap of 0 halts; usage_pct is then null."""
        decision = run([scope(cap=0)], 0)
        assert decision.verdict is Verdict.HALT_100
        assert decision.projected_pct is None

    def test_provider_sub_cap_is_checked_with_the_aggregate(self):
        """The provider's sub-cap halts even when the aggregate has room."""
        aggregate = scope(10, rd=reading())
        provider = scope(4.5, cap=5, rd=reading(), key="provider:openai")
        decision = run([aggregate, provider], 1)
        assert decision.verdict is Verdict.HALT_100
        assert decision.deciding.key == "provider:openai"

    def test_aggregate_halts_even_when_provider_has_room(self):
        """Both caps apply: the aggregate decides when it is the fuller."""
        decision = run([scope(99.5, rd=reading()), scope(0, cap=5, key="provider:x")], 1)
        assert decision.verdict is Verdict.HALT_100
        assert decision.deciding.key == "aggregate"

    def test_used_is_the_larger_of_counter_and_billing(self):
        """Fresh billing never hides a higher local count, and a higher bill counts."""
        assert scope(50, billing=10).used_micros == 50 * USD
        assert scope(10, billing=50).used_micros == 50 * USD
        assert run([scope(10, billing=89, rd=reading())], 1).verdict is Verdict.WARN_90

    def test_reserved_counts_towards_usage(self):
        """Open reservations count like spend."""
        assert usage_pct(scope(40, 40)) == Fraction(80)


class TestUncertainty:
    """Rows 1–5 and their order."""

    def test_counter_problem_halts_first(self):
        """Row 1 beats every other condition."""
        decision = run(
            [scope(80, blocking=True)],
            counter_problem="torn tail",
            head_ts=NOW + dt.timedelta(hours=1),
        )
        assert decision.reason is Uncertainty.COUNTER_INCONSISTENT
        assert decision.diagnostic == "torn tail"

    def test_drift_blocker_halts_at_any_usage(self):
        """Row 2 applies even far below the cap."""
        assert run([scope(0, blocking=True)]).reason is Uncertainty.COUNTER_DRIFT

    @pytest.mark.parametrize(("used", "halts"), [(75, False), (75.000001, True), (90, True)])
    def test_billing_stale_only_above_stale_halt_pct(self, used, halts):
        """Row 3: without a reading, usage above 75 % halts; at exactly 75 % it does not."""
        decision = run([scope(used)], 0)
        assert (decision.reason is Uncertainty.BILLING_STALE) is halts

    @pytest.mark.parametrize(("age", "halts"), [(900, False), (901, True)])
    def test_billing_stale_age_limit(self, age, halts):
        """Row 3: a reading fetched exactly stale_seconds ago is still recent enough."""
        decision = run([scope(80, rd=reading(age=age))], 0)
        assert (decision.reason is Uncertainty.BILLING_STALE) is halts

    @pytest.mark.parametrize(("lag", "halts"), [(299, False), (300, True)])
    def test_provider_lag_at_or_above_threshold(self, lag, halts):
        """Row 4: billing_ts ≥ provider_lag_seconds older than its fetch halts near the cap."""
        decision = run([scope(80, rd=reading(lag=lag))], 0)
        assert (decision.reason is Uncertainty.PROVIDER_LAG) is halts

    def test_provider_lag_ignored_below_stale_halt_pct(self):
        """Row 4 needs usage above stale_halt_pct."""
        assert run([scope(10, rd=reading(lag=3000))], 0).verdict is Verdict.ALLOW

    @pytest.mark.parametrize(("skew", "halts"), [(60, False), (61, True), (-61, True)])
    def test_clock_drift_against_server_ts(self, skew, halts):
        """Row 5: local and provider clocks may differ by at most the tolerance."""
        decision = run([scope(0, rd=reading(server_skew=skew))], 0)
        assert (decision.reason is Uncertainty.CLOCK_DRIFT) is halts

    def test_clock_drift_billing_ts_in_the_future(self):
        """Row 5: a billing_ts beyond the tolerance in the future halts."""
        assert run([scope(0, rd=reading(lag=-61, server_skew=None))]).reason is (
            Uncertainty.CLOCK_DRIFT
        )

    @pytest.mark.parametrize(("ahead", "halts"), [(60, False), (61, True)])
    def test_clock_drift_behind_the_chain_head(self, ahead, halts):
        """Row 5: now more than the tolerance before the chain's newest entry halts."""
        decision = run([scope(0)], 0, head_ts=NOW + dt.timedelta(seconds=ahead))
        assert (decision.reason is Uncertainty.CLOCK_DRIFT) is halts
        if halts:
            assert "2026-11-22T12:00:00.000000Z" in (decision.diagnostic or "")

    def test_stale_beats_lag_beats_clock(self):
        """When rows 3–5 all hold, the first one is reported."""
        stale_lagging_skewed = reading(age=1000, lag=400, server_skew=120)
        assert run([scope(80, rd=stale_lagging_skewed)], 0).reason is Uncertainty.BILLING_STALE
        lagging_skewed = reading(lag=400, server_skew=120)
        assert run([scope(80, rd=lagging_skewed)], 0).reason is Uncertainty.PROVIDER_LAG

    def test_uncertainty_beats_halt_100(self):
        """An uncertain counter halts with the uncertainty, not halt-100."""
        assert run([scope(120)], 0).reason is Uncertainty.BILLING_STALE


class TestDecidingScope:
    """The deciding cap is the one with the highest projected %."""

    def test_zero_cap_outranks(self):
        """A zero cap decides."""
        zero = scope(cap=0, key="provider:x")
        assert deciding_scope([scope(99), zero], 0).key == "provider:x"

    def test_tie_keeps_aggregate(self):
        """On a tie the aggregate (listed first) decides."""
        assert deciding_scope([scope(50), scope(5, cap=10, key="provider:x")], 0).key == "aggregate"


class TestVerdictKind:
    def test_admits_and_halts_split_the_four_verdicts(self):
        """``allow`` and ``warn-90`` admit; ``halt-100`` and ``halt-uncertainty`` halt."""
        assert [v for v in Verdict if v.admits] == [Verdict.ALLOW, Verdict.WARN_90]
        assert [v for v in Verdict if v.halts] == [Verdict.HALT_100, Verdict.HALT_UNCERTAINTY]

    def test_a_verdict_prints_as_the_text_the_json_carries(self):
        """A ``str`` enum: the CLI's JSON and any f-string keep the verdict's text."""
        assert json.dumps({"verdict": Verdict.WARN_90}) == '{"verdict": "warn-90"}'
        assert f"{Verdict.HALT_100}" == "halt-100"

    @pytest.mark.parametrize("text", ["allow", "warn-90", "halt-100", "halt-uncertainty"])
    def test_read_gives_the_verdict_the_text_names(self, text):
        assert Verdict.read(text) is Verdict(text)
        assert Verdict.named(text) is Verdict(text)

    @pytest.mark.parametrize(
        "text", ["ALLOW", "allow ", "warn_90", "admit", "", None, 1, ["allow"]]
    )
    def test_an_unknown_verdict_reads_as_a_halt(self, text):
        """Fail-closed: a verdict text this release does not know never admits."""
        assert Verdict.named(text) is None
        assert Verdict.read(text) is Verdict.HALT_UNCERTAINTY
        assert not Verdict.read(text).admits
