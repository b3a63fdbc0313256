"""ledger report: bill readings, the active period and --by model|session|agent."""

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Result, clean_env, run_process
from tests.gate_helpers import Observer
from tests.integration.test_report import DAY, Day


def real(args: list[str], env: dict[str, str] | None = None) -> Result:
    return run_process(args, env=clean_env(**(env or {})))


@pytest.fixture
def session(home, tmp_path: Path) -> Day:
    """One hour of calls (10:00 to 11:00) from two agents, real ledger processes.

    openai: 1.50 settling a verdict that names model gpt-x, session s1 and
    agent planner, then 0.50 recorded with gpt-x and s1 only; anthropic: 3.00
    with claude-a and s2. The bill is read twice: a poll of openai at 10:20
    and the reading a reconcile of the aggregate takes at 10:50.
    """
    observer = Observer(tmp_path / "observer", home)
    day = Day(real, home, observer)
    ref = day(
        "10:00:00", "verdict", "2", "--provider", "openai", "--model", "gpt-x",
        "--cycle-id", "s1", "--agent", "planner",
    )["verdict_ref"]  # fmt: skip
    day("10:05:00", "record", "1.5", "--provider", "openai", "--verdict-ref", ref)
    observer.answer(1.5, f"{DAY}T10:19:00Z")
    day("10:20:00", "poll", "--provider", "openai")
    day("10:30:00", "record", "3", "--provider", "anthropic", "--model-id", "claude-a",
        "--cycle-id", "s2")  # fmt: skip
    day("10:40:00", "record", "0.5", "--provider", "openai", "--model-id", "gpt-x",
        "--cycle-id", "s1")  # fmt: skip
    observer.answer(5.25, f"{DAY}T10:49:00Z")
    day("10:50:00", "reconcile")
    return day


def rows(document: dict[str, Any]) -> list[tuple[str, int, int, str | None]]:
    breakdown = document["breakdown"]
    return [(r["key"], r["calls"], r["usd_micros"], r["share_pct"]) for r in breakdown["rows"]]


def test_bill_readings_are_listed_with_time_scope_and_amount(session):
    """The poll's reading and the one the reconcile took, in chain order, exact micros."""
    doc = session("11:00:00", "report", "--json")
    readings = [
        (r["time"][11:19], r["provider"], r["scope"], r["usd_micros"], r["usd"], r["source"])
        for r in doc["bill_readings"]
    ]
    assert readings[0] == ("10:20:00", "openai", "provider:openai", 1_500_000, 1.5, "observation")
    assert readings[-1][1:] == ("aggregate", "aggregate", 5_250_000, 5.25, "reconcile")
    assert len(readings) == 2
    assert doc["first_entry_ts"] == f"{DAY}T10:00:00.000000Z"
    assert doc["last_entry_ts"] == f"{DAY}T10:50:00.000000Z"
    assert doc["breakdown"] is None
    text = session("11:00:00", "report").stdout
    assert "Bill readings: 2" in text
    assert "provider:openai  $1.50" in text


def test_a_reading_fetched_on_another_day_is_not_the_days(session):
    """Readings belong to the budget day they were fetched on."""
    doc = session("09:00:00", "report", "--json", "--day", DAY, day="2026-03-03")
    assert len(doc["bill_readings"]) == 2
    other = session("09:00:00", "report", "--json", day="2026-03-03")
    assert other["bill_readings"] == []
    assert other["first_entry_ts"] is None


def test_by_model_takes_a_settled_verdicts_model(session):
    """The 1.50 record names no model: it is gpt-x's, from the verdict it settles."""
    doc = session("11:00:00", "report", "--json", "--by", "model")
    assert doc["breakdown"]["by"] == "model"
    assert rows(doc) == [
        ("claude-a", 1, 3_000_000, "60.0000"),
        ("gpt-x", 2, 2_000_000, "40.0000"),
    ]
    assert doc["breakdown"]["rows"][0]["usd"] == 3.0


def test_by_session_and_by_agent_group_calls_without_one_as_none(session):
    by_session = session("11:00:00", "report", "--json", "--by", "session")
    assert rows(by_session) == [("s2", 1, 3_000_000, "60.0000"), ("s1", 2, 2_000_000, "40.0000")]
    by_agent = session("11:00:00", "report", "--json", "--by", "agent")
    assert rows(by_agent) == [
        ("(none)", 2, 3_500_000, "70.0000"),
        ("planner", 1, 1_500_000, "30.0000"),
    ]
    text = session("11:00:00", "report", "--by", "agent").stdout
    assert "Spend by agent (recorded calls):" in text
    assert "(none)   2      $3.50  70.0%" in text


def test_a_day_without_calls_breaks_down_to_nothing(home):
    result = real(["--home", str(home), "report", "--json", "--by", "model"],
                  env={"LEDGER_NOW": f"{DAY}T10:00:00Z"})  # fmt: skip
    assert result.code == 0, result.stderr
    assert result.json()["breakdown"] == {"by": "model", "total_usd_micros": 0, "rows": []}


@pytest.mark.parametrize("bad", ["team", "Model", ""])
def test_a_malformed_by_is_a_usage_error(home, bad):
    result = real(["--home", str(home), "report", "--by", bad],
                  env={"LEDGER_NOW": f"{DAY}T10:00:00Z"})  # fmt: skip
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"ledger: --by: {bad!r} is not one of agent, session, key, tag, model, provider, client\n"
    )


def test_an_unpriced_call_counts_its_price_once_rebuild_state_seals_it(home, tmp_path: Path):
    """Counted as a call at once; its dollars join its model when rebuild-state prices it."""
    day = Day(real, home, Observer(tmp_path / "observer", home))
    usage = '{"input_tokens": 1000, "output_tokens": 100}'
    day("10:00:00", "record", "--provider", "anthropic", "--model", "mystery-1",
        "--usage-json", usage)  # fmt: skip
    day("10:10:00", "record", "0.01", "--provider", "anthropic", "--model-id", "known-1")
    before = day("10:20:00", "report", "--json", "--by", "model")
    assert rows(before) == [("known-1", 1, 10_000, "100.0000"), ("mystery-1", 1, 0, "0.0000")]
    config = home / "ledger.toml"
    config.write_text(
        config.read_text()
        + '\n[prices."anthropic/mystery-1"]\ninput_per_mtok = 2\noutput_per_mtok = 10\n'
    )
    day("10:30:00", "rebuild-state")
    after = day("10:40:00", "report", "--json", "--by", "model")
    # 1000 × 2 + 100 × 10 = 3,000 µ$
    assert rows(after) == [("known-1", 1, 10_000, "76.9231"), ("mystery-1", 1, 3_000, "23.0769")]
