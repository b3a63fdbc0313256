"""Property: whatever the calls, no budget's admitted spend passes its cap, and the
counters are a fold of the chain (``rebuild-state`` gives the same figures for every value)."""

import contextlib
import datetime as dt
import io
import json
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ledger.core.budget_calendar import period_key
from ledger.core.budgets import Budget, CallScope, applicable, parse_budgets
from ledger.runtime import Runtime
from ledger.services.billing.reconcile import rebuild_state
from ledger.services.gate import calls
from ledger.services.gate.budget_views import budget_rows
from tests.gate_helpers import iso, state_path

START = dt.datetime(2026, 11, 28, 20, 0, 0, tzinfo=dt.UTC)  # a Saturday, near a month's end
USD = 1_000_000
TEMPLATES: list[dict[str, Any]] = [
    {"name": "daily", "period": "day"},
    {"name": "weekly-research", "period": "week", "match": {"agent": "research-*"}},
    {"name": "monthly-tagged", "period": "month", "match": {"tag": "t"}},
    {"name": "per-session", "period": "day", "per": "session"},
    {"name": "burst", "period": "rolling:3h"},
    {"name": "burst-per-agent", "period": "rolling:1d", "per": "agent"},
]

budget_sets = st.lists(
    st.tuples(st.sampled_from(TEMPLATES), st.integers(1, 12)),
    min_size=1, max_size=4, unique_by=lambda pair: pair[0]["name"],
).map(lambda pairs: [{**table, "usd": cap} for table, cap in pairs])  # fmt: skip

steps = st.lists(
    st.tuples(
        st.integers(0, 400),  # minutes since the previous call
        st.integers(0, 8),  # estimate in half dollars
        st.sampled_from([None, "a", "b"]),  # session
        st.sampled_from(["research-1", "research-2", "ops"]),  # agent
        st.booleans(),  # tagged
        st.sampled_from([None, 0, 1, 2]),  # recorded: never, or this many quarters of the estimate
    ),
    min_size=1, max_size=25,
)  # fmt: skip


def _home() -> Path:
    from ledger.cli import main

    path = Path(tempfile.mkdtemp()) / "home"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main(["--home", str(path), "init", "--daily-cap-usd", "100000"])
    return path


def _runtime(home: Path, budgets: list[dict[str, object]], moment: dt.datetime) -> Runtime:
    env = {"LEDGER_NOW": iso(moment), "LEDGER_BUDGETS": json.dumps(budgets),
           "LEDGER_BILLING_STALE_HALT_PCT": "100", "LEDGER_NO_SERVER": "1"}  # fmt: skip
    return Runtime(home, env)


def _spend_in_periods(
    budget: Budget, spent: list[tuple[dt.datetime, dt.datetime, CallScope, int]]
) -> dict[tuple[str | None, str | None, str], int]:
    """Recorded spend per counter: the admitting period, or each window ending at a record."""
    totals: dict[tuple[str | None, str | None, str], int] = defaultdict(int)
    window = budget.window_seconds
    for admitted, recorded, scope, micros in spent:
        for found in applicable([budget], scope):
            if window is None:
                totals[found.per_value, period_key(budget, admitted, dt.UTC), ""] += micros
                continue
            for _a, end, other, _m in spent:
                in_window = end - dt.timedelta(seconds=window) < recorded <= end
                same = applicable([budget], other) and applicable([budget], other)[0] == found
                if in_window and same:
                    totals[found.per_value, None, iso(end)] += micros
    return totals


@given(budget_sets, steps)
def test_no_budget_is_overspent_and_rebuilding_changes_nothing(budgets, calls_made):
    home = _home()
    try:
        _check(home, budgets, calls_made)
    finally:
        shutil.rmtree(home.parent)


def _check(home: Path, budgets: list[dict[str, object]], calls_made: list[tuple[Any, ...]]) -> None:
    defined = parse_budgets(budgets, "budgets")
    now = START
    spent = []
    for minutes, halves, session, agent, tagged, quarters in calls_made:
        now += dt.timedelta(minutes=minutes)
        tags = ["t"] if tagged else None
        estimate = halves * USD // 2
        document, admitted = calls.verdict(
            _runtime(home, budgets, now), f"{estimate / USD}", "openai",
            cycle_id=session, agent=agent, tags=tags,
        )  # fmt: skip
        for shown in document["budgets"]:
            if admitted:
                assert shown["used"] + shown["reserved"] + estimate / USD < shown["cap"] + 1e-9
        if not admitted or quarters is None:
            continue
        actual = estimate * quarters // 4
        recorded = now + dt.timedelta(seconds=1)
        calls.record(_runtime(home, budgets, recorded), f"{actual / USD}", "openai",
                     verdict_ref=document["verdict_ref"])  # fmt: skip
        scope = CallScope("openai", agent, None, session, None, tuple(tags or ()))
        spent.append((now, recorded, scope, actual))
    for budget in defined:
        for counter, total in _spend_in_periods(budget, spent).items():
            assert total < budget.cap_micros or total == 0, (budget.name, counter, total)

    later = now + dt.timedelta(seconds=2)
    before = _kept(home, budgets, later)
    rebuild_state(_runtime(home, budgets, later))
    assert _kept(home, budgets, later) == before


def _kept(home: Path, budgets: list[dict[str, object]], moment: dt.datetime) -> Any:
    """What the budgets' derived state says: its reservations and periods, every value's figures.

    Counters a budget with ``per`` keeps apart (``state/counters/``) are read
    through the views, as ``ledger budgets`` reads them.
    """
    kept = json.loads(state_path(home).read_text().splitlines()[0])["data"]["budgets"]
    periods = {name: table["period"] for name, table in kept.pop("by_name").items()}
    return kept, periods, budget_rows(_runtime(home, budgets, moment))
