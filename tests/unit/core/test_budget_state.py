"""The budgets' counters as a fold of verdicts and records, and the figures a verdict reads."""

import datetime as dt
from fractions import Fraction
from typing import Any

from ledger.core.budget_state import (
    apply_budget_event,
    budget_checks,
    empty_budget_state,
)
from ledger.core.budgets import CallScope, parse_budgets

DAY = parse_budgets([{"name": "daily", "usd": 10, "period": "day"}], "budgets")
BURST = parse_budgets([{"name": "burst", "usd": 20, "period": "rolling:5h"}], "budgets")
SESSIONS = parse_budgets([{"name": "s", "usd": 5, "period": "day", "per": "session"}], "budgets")


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


class Fold:
    """A budgets' state folded under fixed definitions, fed events by time."""

    def __init__(self, budgets: Any) -> None:
        self.budgets = budgets
        self.state = empty_budget_state(budgets)
        self.count = 0

    def verdict(self, ts: str, micros: int, ttl: str = "2099-01-01T00:00:00.000000Z",
                **scope: Any) -> str:  # fmt: skip
        self.count += 1
        ref = f"{self.count:064x}"
        payload = {"reservation": {"micros": micros, "expires_at": ttl}, **scope}
        apply_budget_event(self.state, self.budgets, "budget.allow", ts, payload, ref)
        return ref

    def record(self, ts: str, micros: int, ref: str | None = None, **scope: Any) -> None:
        self.count += 1
        payload = {"actual_micros": micros, "verdict_ref": ref, "provider": "openai", **scope}
        apply_budget_event(
            self.state, self.budgets, "budget.record_call", ts, payload, f"{self.count:064x}"
        )

    def figures(self, now: str, **scope: Any) -> list[tuple[str, int, int]]:
        checks = budget_checks(
            self.state, self.budgets, CallScope(**scope), utc(now), dt.UTC, Fraction(90)
        )
        return [(c.scope.key, c.scope.used_micros, c.scope.reserved_micros) for c in checks]


def test_a_reservation_counts_until_settled_then_its_spend_counts():
    """An admitted verdict reserves on the budget; its record replaces the reservation."""
    fold = Fold(DAY)
    ref = fold.verdict("2026-11-26T10:00:00.000000Z", 3_000_000)
    assert fold.figures("2026-11-26T10:00:01.000000Z") == [("budget:daily", 0, 3_000_000)]
    fold.record("2026-11-26T10:00:02.000000Z", 2_000_000, ref)
    assert fold.figures("2026-11-26T10:00:03.000000Z") == [("budget:daily", 2_000_000, 0)]


def test_a_record_settling_after_midnight_counts_on_the_day_it_was_admitted():
    """Admitted at 23:59, recorded at 00:01: the new day starts empty."""
    fold = Fold(DAY)
    ref = fold.verdict("2026-11-26T23:59:00.000000Z", 9_000_000)
    fold.record("2026-11-27T00:01:00.000000Z", 9_000_000, ref)
    assert fold.figures("2026-11-27T00:02:00.000000Z") == [("budget:daily", 0, 0)]


def test_a_record_without_a_live_reservation_counts_when_recorded():
    """An unknown or expired verdict_ref: the record counts on its own day."""
    fold = Fold(DAY)
    ref = fold.verdict("2026-11-26T23:50:00.000000Z", 1, ttl="2026-11-26T23:55:00.000000Z")
    assert fold.figures("2026-11-26T23:56:00.000000Z") == [("budget:daily", 0, 0)]
    fold.record("2026-11-27T00:01:00.000000Z", 4_000_000, ref)
    assert fold.figures("2026-11-27T00:02:00.000000Z") == [("budget:daily", 4_000_000, 0)]


def test_a_new_period_prunes_the_old_counters():
    """The first entry of a new day drops the day before from the state."""
    fold = Fold(SESSIONS)
    for session in ("a", "b", "c"):
        fold.record("2026-11-26T10:00:00.000000Z", 1, cycle_id=session)
    assert len(fold.state["by_name"]["s"]["values"]) == 3
    fold.record("2026-11-27T10:00:00.000000Z", 1, cycle_id="d")
    assert list(fold.state["by_name"]["s"]["values"]) == ["d"]


def test_per_session_counters_are_separate():
    """One session's spend never counts against another's cap."""
    fold = Fold(SESSIONS)
    fold.record("2026-11-26T10:00:00.000000Z", 4_000_000, cycle_id="a")
    assert fold.figures("2026-11-26T10:01:00.000000Z", session="a") == [
        ("budget:s[a]", 4_000_000, 0)
    ]
    assert fold.figures("2026-11-26T10:01:00.000000Z", session="b") == [("budget:s[b]", 0, 0)]
    assert fold.figures("2026-11-26T10:01:00.000000Z") == []


def test_a_rolling_window_counts_spend_sealed_within_it_to_the_microsecond():
    """Spend sealed at T counts until T + 5 h (excluded): a minute before and after."""
    fold = Fold(BURST)
    fold.record("2026-11-26T10:00:00.000000Z", 7_000_000)
    fold.record("2026-11-26T11:00:00.000000Z", 1_000_000)
    assert fold.figures("2026-11-26T14:59:00.000000Z") == [("budget:burst", 8_000_000, 0)]
    assert fold.figures("2026-11-26T14:59:59.999999Z") == [("budget:burst", 8_000_000, 0)]
    assert fold.figures("2026-11-26T15:00:00.000000Z") == [("budget:burst", 1_000_000, 0)]
    assert fold.figures("2026-11-26T15:01:00.000000Z") == [("budget:burst", 1_000_000, 0)]
    assert fold.figures("2026-11-26T16:01:00.000000Z") == [("budget:burst", 0, 0)]


def test_a_rolling_window_drops_items_as_they_leave_it():
    """The state keeps only the records still inside the window (bounded)."""
    fold = Fold(BURST)
    for hour in range(10):
        fold.record(f"2026-11-26T{hour:02d}:00:00.000000Z", 1_000_000)
    counter = fold.state["by_name"]["burst"]["values"][""]
    assert [item[0][11:13] for item in counter["items"]] == ["05", "06", "07", "08", "09"]
    assert counter["used"] == 5_000_000


def test_events_without_budgets_leave_the_state_alone():
    """No budgets defined: nothing is kept."""
    fold = Fold(())
    fold.record("2026-11-26T10:00:00.000000Z", 1)
    assert fold.state["by_name"] == {}


def test_records_of_one_second_leave_the_window_with_the_latest_of_them():
    """Within a second, spend counts until the latest record of that second leaves."""
    fold = Fold(BURST)
    fold.record("2026-11-26T10:00:00.100000Z", 1_000_000)
    fold.record("2026-11-26T10:00:00.900000Z", 2_000_000)
    assert fold.figures("2026-11-26T15:00:00.500000Z") == [("budget:burst", 3_000_000, 0)]
    assert fold.figures("2026-11-26T15:00:00.900000Z") == [("budget:burst", 0, 0)]


def test_a_busy_rolling_window_stays_bounded_and_never_lets_spend_out_early():
    """Records of one minute count together as the latest of them: late, never early."""
    fold = Fold(BURST)
    for second in range(200):
        fold.record(f"2026-11-26T10:{second // 60:02d}:{second % 60:02d}.000000Z", 1)
    counter = fold.state["by_name"]["burst"]["values"][""]
    assert len(counter["items"]) == 4  # one per minute
    assert counter["used"] == 200
    # the first minute's records leave with the latest of them, at 15:00:59
    assert fold.figures("2026-11-26T15:00:58.000000Z") == [("budget:burst", 200, 0)]
    assert fold.figures("2026-11-26T15:00:59.000000Z") == [("budget:burst", 140, 0)]
    assert fold.figures("2026-11-26T15:03:18.999999Z") == [("budget:burst", 20, 0)]
    assert fold.figures("2026-11-26T15:03:19.000000Z") == [("budget:burst", 0, 0)]
