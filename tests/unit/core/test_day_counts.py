"""Today's verdicts counted in the derived state: the newest budget day only."""

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

from ledger.core.day_counts import KEY, count_entry


def test_a_later_day_starts_afresh_and_an_earlier_one_is_not_counted():
    """Counts follow the newest day an entry was sealed on, in the budget day's zone."""
    meta: dict[str, Any] = {}
    zone = ZoneInfo("America/New_York")
    count_entry(meta, "budget.allow", "2026-03-02T03:00:00.000000Z", {}, zone)  # 1 March there
    count_entry(meta, "budget.allow", "2026-03-02T06:00:00.000000Z", {}, zone)
    count_entry(meta, "budget.halt_uncertainty", "2026-03-02T07:00:00.000000Z",
                {"uncertainty_reason": "billing_stale"}, zone)  # fmt: skip
    count_entry(meta, "budget.allow", "2026-03-02T04:59:00.000000Z", {}, zone)  # back to 1 March
    count_entry(
        meta, "budget.record_call", "2026-03-02T08:00:00.000000Z", {"actual_micros": 1}, zone
    )
    count_entry(meta, "budget.record_call", "2026-03-02T08:00:00.000000Z",
                {"unknown_usage": ["web_search_requests", "service_tier:flex"]}, zone)  # fmt: skip
    assert meta[KEY] == {
        "day": "2026-03-02",
        "verdicts": {"budget.allow|": 1, "budget.halt_uncertainty|billing_stale": 1},
        "unknown_usage": {"web_search_requests": 1, "service_tier:flex": 1},
    }


def test_other_entries_count_nothing():
    """A plain record, an observation: no day is started for them."""
    meta: dict[str, Any] = {}
    count_entry(meta, "budget.record_call", "2026-03-02T08:00:00.000000Z", {}, dt.UTC)
    count_entry(meta, "budget.observation", "2026-03-02T08:00:00.000000Z", {}, dt.UTC)
    assert meta == {}
