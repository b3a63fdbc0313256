"""Property: a rolling window's bounded items give exactly the documented rounding.

Whatever the window (an hour to a month) and however busy, a counter holds at
most 61 + 242 items, and its figure at any later moment equals an exact
reference restated from the records alone: a record counts while the latest
record of its group is inside the window, its group being its minute when it
is within the hour before the last fold, else its slot of
``coarse_minutes(window)`` minutes (``docs/budgets.md``). So spend leaves a
window late by less than a group's width, never early.
"""

import datetime as dt
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.budget_state import apply_budget_event, budget_checks, empty_budget_state
from ledger.core.budgets import CallScope, parse_budgets
from ledger.core.rolling_items import FINE_MINUTES, coarse_minutes, minute_of
from ledger.core.timefmt import format_ts

START = dt.datetime(2026, 11, 26, 10, 0, tzinfo=dt.UTC)
WINDOWS = {"1h": 3600, "2h": 7200, "5h": 18_000, "24h": 86_400, "7d": 7 * 86_400,
           "30d": 30 * 86_400}  # fmt: skip
MOST_ITEMS = FINE_MINUTES + 1 + 240 + 2


def _fold(window: str, records: list[tuple[int, int]]) -> tuple[dict[str, Any], Any]:
    budgets = parse_budgets([{"name": "w", "usd": 10**6, "period": f"rolling:{window}"}], "b")
    state = empty_budget_state(budgets)
    for number, (seconds, micros) in enumerate(records):
        ts = format_ts(START + dt.timedelta(seconds=seconds))
        payload = {"actual_micros": micros, "verdict_ref": None, "provider": "openai"}
        apply_budget_event(state, budgets, "budget.record_call", ts, payload, f"{number:064x}")
    return state, budgets


def _figure(state: dict[str, Any], budgets: Any, now: dt.datetime) -> int:
    checks = budget_checks(state, budgets, CallScope(), now, dt.UTC, Fraction(90))
    return checks[0].scope.used_micros


def _reference(window: int, records: list[tuple[int, int]], now: dt.datetime) -> int:
    """The documented rounding, restated: a group counts while its latest record is inside."""
    times = [format_ts(START + dt.timedelta(seconds=s)) for s, _ in records]
    fold_minute = max(minute_of(ts) for ts in times)
    width = coarse_minutes(window)
    groups: dict[tuple[bool, int], list[int]] = {}
    latest: dict[tuple[bool, int], str] = {}
    for ts, (_, micros) in zip(times, records, strict=True):
        minute = minute_of(ts)
        key = (True, minute // width) if minute < fold_minute - FINE_MINUTES else (False, minute)
        groups.setdefault(key, []).append(micros)
        latest[key] = max(latest.get(key, ts), ts)
    start = format_ts(now - dt.timedelta(seconds=window))
    return sum(sum(group) for key, group in groups.items() if latest[key] > start)


def _exact(window: int, records: list[tuple[int, int]], now: dt.datetime) -> int:
    start = now - dt.timedelta(seconds=window)
    return sum(micros for s, micros in records if START + dt.timedelta(seconds=s) > start)


@settings(max_examples=60, deadline=None)
@given(
    window=st.sampled_from(sorted(WINDOWS)),
    gaps=st.lists(st.tuples(st.integers(0, 5400), st.integers(1, 10**6)), min_size=1, max_size=120),
    spread=st.sampled_from([1, 7, 60, 600]),
    later=st.integers(0, 40 * 86_400),
)
def test_the_bounded_window_equals_its_documented_rounding(window, gaps, spread, later):
    seconds, records = 0, []
    for gap, micros in gaps:
        seconds += gap * spread
        records.append((seconds, micros))
    state, budgets = _fold(window, records)
    length = WINDOWS[window]
    counter = state["by_name"]["w"]["values"][""]
    assert len(counter["items"]) <= MOST_ITEMS
    assert [item[0] for item in counter["items"]] == sorted(item[0] for item in counter["items"])
    last = START + dt.timedelta(seconds=records[-1][0])
    for now in (last, last + dt.timedelta(seconds=later), last + dt.timedelta(seconds=length)):
        bounded = _figure(state, budgets, now)
        assert bounded == _reference(length, records, now)
        assert _exact(length, records, now) <= bounded  # never early
        slack = dt.timedelta(minutes=coarse_minutes(length), seconds=60)
        assert bounded <= _exact(length, records, now - slack)  # late by less than a group


def test_a_month_of_a_call_a_minute_keeps_a_few_hundred_items():
    """A week's window with a call every minute: about 300 items, not 10,000."""
    records = [(minute * 60, 1_000) for minute in range(14 * 24 * 60)]
    state, _ = _fold("7d", records)
    items = state["by_name"]["w"]["values"][""]["items"]
    assert len(items) <= MOST_ITEMS
    assert sum(micros for _, micros in items) == state["by_name"]["w"]["values"][""]["used"]
