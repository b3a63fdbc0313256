"""The rollup fold and its grouping into report rows (``ledger.core.rollups``)."""

import datetime as dt
import zoneinfo

import pytest

from ledger.core.rollups import CellKey, add, cell_of, group, slot_range, totals

MOMENT = dt.datetime(2026, 3, 1, 23, 50, tzinfo=dt.UTC)


def _record(**extra: object) -> dict[str, object]:
    return {"provider": "openai", "actual_micros": 1_000, "model_id": "m", **extra}


def _cells(*items: tuple[str, dt.datetime, dict[str, object]]) -> dict[CellKey, list[int]]:
    cells: dict[CellKey, list[int]] = {}
    for event_type, moment, payload in items:
        found = cell_of(event_type, moment, payload)
        assert found is not None
        add(cells, *found)
    return cells


def test_client_is_a_dimension_once_calls_carry_it_and_empty_before():
    cells = _cells(
        ("budget.record_call", MOMENT, _record(client="claude-code")),
        ("budget.record_call", MOMENT, _record()),
    )
    rows = group(cells.items(), ("client",), dt.UTC)
    assert [(row.values, row.usd_micros) for row in rows] == [
        (("",), 1_000),
        (("claude-code",), 1_000),
    ]


def test_tokens_by_kind_and_halts_count_in_their_own_columns():
    tokens = {"input": 5, "cache_write_5m": 1, "cache_write_1h": 2, "cache_read": 7, "output": 3,
              "reasoning": 1}  # fmt: skip
    cells = _cells(
        ("budget.record_call", MOMENT, _record(tokens=tokens)),
        ("budget.halt_100", MOMENT, {"provider": "openai", "model": "m"}),
    )
    (row,) = group(cells.items(), ("model",), dt.UTC)
    assert (row.calls, row.input_tokens, row.output_tokens) == (1, 5, 3)
    assert (row.cache_read_tokens, row.cache_write_tokens, row.halts) == (7, 3, 1)
    assert cell_of("budget.allow", MOMENT, {"provider": "openai"}) is None


def test_a_call_counts_under_each_tag_but_once_in_the_total():
    cells = _cells(("budget.record_call", MOMENT, _record(tags=["b", "a"])))
    rows = group(cells.items(), ("tag",), dt.UTC)
    assert [row.values for row in rows] == [("a",), ("b",)]
    assert totals(rows)["usd_micros"] == 2_000
    assert totals(group(cells.items(), (), dt.UTC))["usd_micros"] == 1_000


def test_filters_are_globs_and_the_empty_value_means_none():
    cells = _cells(
        ("budget.record_call", MOMENT, _record(agent="research-1")),
        ("budget.record_call", MOMENT, _record()),
    )
    assert totals(group(cells.items(), (), dt.UTC, {"agent": "research-*"}))["calls"] == 1
    assert totals(group(cells.items(), (), dt.UTC, {"agent": ""}))["calls"] == 1


def test_the_reporting_zone_moves_a_call_to_its_own_day():
    cells = _cells(("budget.record_call", MOMENT, _record()))
    kolkata = zoneinfo.ZoneInfo("Asia/Kolkata")
    assert [row.day for row in group(cells.items(), (), dt.UTC)] == ["2026-03-01"]
    assert [row.day for row in group(cells.items(), (), kolkata)] == ["2026-03-02"]
    first, end = slot_range("2026-03-02", "2026-03-02", kolkata)
    assert end - first == 96


def test_a_zone_whose_midnight_is_not_on_a_quarter_hour_is_refused():
    with pytest.raises(ValueError, match="quarter hour"):
        slot_range("1971-01-01", "1971-01-01", zoneinfo.ZoneInfo("Africa/Monrovia"))
