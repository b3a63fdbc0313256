"""Property: the shortcuts a verdict takes with many budgets give exactly the plain answers.

Which budgets apply is remembered per call scope with compiled globs; periods
are worked out once per kind at a moment; percentages are compared as
integers. Each is checked here against the plain restatement it replaces
(``fnmatchcase`` per glob, ``period_bounds``/``period_key`` per budget,
``Fraction`` per scope).
"""

import datetime as dt
import zoneinfo
from fnmatch import fnmatchcase
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from ledger.core.budget_calendar import period_bounds, period_key
from ledger.core.budget_periods import PeriodsAt
from ledger.core.budgets import (
    Applicable,
    Budget,
    CallScope,
    applicable,
    budget_index,
    parse_budgets,
)
from ledger.core.config import Config
from ledger.core.spend import ScopeState
from ledger.core.timefmt import format_ts
from ledger.core.verdict import Verdict, decide, deciding_scope
from ledger.services.gate.budget_views import budgets_document

USD = 1_000_000
ZONES = [
    dt.UTC,
    zoneinfo.ZoneInfo("Europe/Berlin"),
    zoneinfo.ZoneInfo("America/New_York"),
    zoneinfo.ZoneInfo("Asia/Kolkata"),
    zoneinfo.ZoneInfo("Australia/Lord_Howe"),  # a half-hour DST change
]
PERIODS = ["day", "week", "month", "total", "rolling:1h", "rolling:5h", "rolling:7d"]
VALUES = ["a", "ab", "b-1", "research-1", "x[1]", "*"]
GLOBS = ["*", "a*", "?", "a?", "research-*", "[ab]*", "[!a]*", "x[[]1]", "b-1", "*-1"]

# Naive bounds, as hypothesis asks; every moment drawn is in UTC.
moments = st.datetimes(
    min_value=dt.datetime(2000, 1, 1),  # noqa: DTZ001
    max_value=dt.datetime(2100, 1, 1),  # noqa: DTZ001
    timezones=st.just(dt.UTC),
)
values = st.none() | st.sampled_from(VALUES)


@st.composite
def budget_tables(draw: st.DrawFn) -> list[dict[str, object]]:
    tables = []
    for n in range(draw(st.integers(0, 8))):
        keys = draw(st.lists(st.sampled_from(["agent", "model", "session", "key", "tag"]),
                             unique=True, max_size=3))  # fmt: skip
        table: dict[str, object] = {
            "name": f"b{n}", "usd": draw(st.integers(0, 50)),
            "period": draw(st.sampled_from(PERIODS)),
        }  # fmt: skip
        if keys:
            table["match"] = {key: draw(st.sampled_from(GLOBS)) for key in keys}
        per = draw(st.sampled_from([None, "session", "agent", "key"]))
        if per is not None:
            table["per"] = per
        tables.append(table)
    return tables


call_scopes = st.builds(
    CallScope,
    provider=st.just("anthropic"),
    agent=values,
    model=values,
    session=values,
    key=values,
    tags=st.lists(st.sampled_from(VALUES), max_size=3).map(tuple),
)


def plain_applicable(budgets: tuple[Budget, ...], scope: CallScope) -> list[Applicable]:
    """Every budget's globs matched one by one with ``fnmatchcase``."""
    found = []
    for budget in budgets:
        per_value = getattr(scope, budget.per) if budget.per is not None else None
        if budget.per is not None and per_value is None:
            continue
        matches = True
        for key, glob in budget.match:
            if key == "tag":
                matches = matches and any(fnmatchcase(tag, glob) for tag in scope.tags)
            else:
                value = getattr(scope, key)
                matches = matches and value is not None and fnmatchcase(value, glob)
        if matches:
            found.append(Applicable(budget, per_value))
    return found


@given(budget_tables(), st.lists(call_scopes, min_size=1, max_size=6))
def test_the_budgets_that_apply_are_those_every_glob_matches(tables, scopes):
    budgets = parse_budgets(tables, "budgets")
    for scope in scopes + scopes:  # the second time, from what the index remembers
        expected = plain_applicable(budgets, scope)
        assert applicable(budgets, scope) == expected
        assert applicable(list(budgets), scope) == expected  # no index kept for a list
        with_list = scope._replace(tags=list(scope.tags))
        assert list(budget_index(budgets).applicable(with_list)) == expected


@given(budget_tables())
def test_one_index_per_configuration(tables):
    budgets = parse_budgets(tables, "budgets")
    assert budget_index(budgets) is budget_index(budgets)
    assert budget_index(budgets).by_name == {budget.name: budget for budget in budgets}


@given(budget_tables(), moments, st.sampled_from(ZONES))
def test_periods_at_a_moment_are_each_budgets_own(tables, moment, zone):
    budgets = parse_budgets(tables, "budgets")
    for periods in (PeriodsAt(moment, zone), PeriodsAt(moment, zone, format_ts(moment))):
        for budget in budgets + budgets:
            start, end = period_bounds(budget, moment, zone)
            assert periods.bounds(budget) == (start, end, format_ts(start), format_ts(end))
            assert periods.key(budget) == period_key(budget, moment, zone)


amounts = st.integers(-5 * USD, 200 * USD)


@st.composite
def scope_states(draw: st.DrawFn) -> ScopeState:
    return ScopeState(
        key=f"budget:b{draw(st.integers(0, 99))}",
        cap_micros=draw(st.sampled_from([0, 1, 3, USD, 7 * USD]) | st.integers(0, 100 * USD)),
        local_micros=draw(amounts),
        billing_micros=None,
        reserved_micros=draw(st.integers(0, 50 * USD)),
        last_spend_ts=None,
        reading=None,
        reconcile_blocking=False,
        reconcile_drift_pct=None,
    )


def plain_pct(scope: ScopeState, estimate: int) -> Fraction | None:
    if scope.cap_micros == 0:
        return None
    return Fraction(100 * (scope.used_micros + scope.reserved_micros + estimate), scope.cap_micros)


def plain_verdict(capped: list[tuple[ScopeState, Fraction]], estimate: int) -> Verdict:
    """SPEC §4 rows 6 and 7 with exact fractions."""
    verdict = Verdict.ALLOW
    for scope, warn_pct in capped:
        pct = plain_pct(scope, estimate)
        if pct is None or pct >= 100:
            return Verdict.HALT_100
        if pct >= warn_pct:
            verdict = Verdict.WARN_90
    return verdict


warn_pcts = st.fractions(0, 100) | st.sampled_from([Fraction(0), Fraction(90), Fraction(100)])


@given(
    scope_states(),
    st.lists(st.tuples(scope_states(), warn_pcts), max_size=12),
    st.integers(0, 20 * USD),
    warn_pcts,
)
def test_decisions_in_integers_are_the_fractions_decisions(
    aggregate, budget_scopes, estimate, warn
):
    # No billing uncertainty, however far past its cap a scope is: rows 6 and 7 decide.
    config = Config(
        daily_cap_micros=aggregate.cap_micros, warn_pct=warn, stale_halt_pct=Fraction(10**40)
    )
    now = dt.datetime(2026, 11, 28, 12, tzinfo=dt.UTC)
    decision = decide([aggregate], estimate, config, now, budget_scopes=budget_scopes)
    capped = [(aggregate, warn), *budget_scopes]

    def rank(scope: ScopeState) -> Fraction:
        pct = plain_pct(scope, estimate)
        return Fraction(10**30) if pct is None else pct

    best = capped[0][0]
    for scope, _warn in capped[1:]:
        if rank(scope) > rank(best):
            best = scope
    assert decision.deciding is best
    assert deciding_scope([scope for scope, _ in capped], estimate) is best
    assert decision.verdict == plain_verdict(capped, estimate)
    assert decision.projected_pct == plain_pct(best, estimate)


@given(st.lists(scope_states(), max_size=12), st.integers(0, 20 * USD))
def test_a_verdicts_printed_percentages_are_the_exact_ones_rounded(scopes, estimate):
    class Check:
        def __init__(self, scope: ScopeState) -> None:
            budget = Budget("b", scope.cap_micros, "day")
            self.scope = scope
            self.figures = type("Figures", (), {"found": Applicable(budget, None)})()
            self.period_texts = ("2026-11-28T00:00:00.000000Z", "2026-11-29T00:00:00.000000Z")

    shown = budgets_document([Check(scope) for scope in scopes], estimate)
    for scope, row in zip(scopes, shown, strict=True):
        pct = plain_pct(scope, estimate)
        assert row["usage_pct"] == (None if pct is None else round(float(pct), 4))
