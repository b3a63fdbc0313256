"""Sessions: ``--session`` beside ``--cycle-id``, and budgets with ``period = "total"``.

"$3 per session" is ``per = "session"`` with ``period = "total"``: a budget that
never resets, whatever day or month the session runs into.
"""

import json
from pathlib import Path
from typing import Any

from tests.conftest import clean_env, run_process
from tests.gate_helpers import state_path

PER_SESSION = """
[[budgets]]
name = "per-session"
usd = 3
period = "total"
per = "session"
"""

MARCH = "2026-03-02T10:00:00Z"
APRIL = "2026-04-15T10:00:00Z"  # another day, week and month


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    result = run_process(
        ["--home", str(home), "init", "--daily-cap-usd", "100", "--billing", "none"]
    )
    assert result.code == 0, result.stderr
    config = home / "ledger.toml"
    config.write_text(config.read_text() + PER_SESSION)
    return home


def _ledger(home: Path, when: str, *args: str) -> Any:
    return run_process(["--home", str(home), *args], env=clean_env(LEDGER_NOW=when))


def _spend_two_dollars_in_march(home: Path) -> None:
    verdict = _ledger(home, MARCH, "verdict", "2", "--provider", "anthropic", "--session", "s1")
    assert verdict.code == 0, verdict.stderr
    ref = json.loads(verdict.stdout)["verdict_ref"]
    record = _ledger(home, MARCH, "record", "2", "--provider", "anthropic", "--session", "s1",
                     "--verdict-ref", ref, "--idempotency-key", "s1-call-1")  # fmt: skip
    assert record.code == 0, record.stderr


def test_a_total_budget_never_resets(tmp_path: Path):
    """A session's $2 of March still counts in April: $1.50 more halts, another session goes on."""
    home = _home(tmp_path)
    _spend_two_dollars_in_march(home)
    halted = _ledger(home, APRIL, "verdict", "1.5", "--provider", "anthropic", "--cycle-id", "s1")
    decision = json.loads(halted.stdout)
    assert (halted.code, decision["verdict"]) == (1, "halt-100")
    assert decision["deciding_cap"] == "budget:per-session[s1]"
    assert decision["budgets"][0]["period"] == "total"
    fits = _ledger(home, APRIL, "verdict", "0.5", "--provider", "anthropic", "--session", "s1")
    assert json.loads(fits.stdout)["verdict"] == "allow"
    other = _ledger(home, APRIL, "verdict", "2.5", "--provider", "anthropic", "--session", "s2")
    assert json.loads(other.stdout)["verdict"] == "allow"


def test_total_budgets_in_budgets_status_report_and_metrics(tmp_path: Path):
    """Every view shows the session's spend since it began, and says the budget never resets."""
    home = _home(tmp_path)
    _spend_two_dollars_in_march(home)
    table = _ledger(home, APRIL, "budgets").stdout
    assert "per-session[s1]  total   (all time)  (never resets)  $2.00" in table
    status = json.loads(_ledger(home, APRIL, "status", "--json").stdout)
    assert [(b["period"], b["used"]) for b in status["budgets"]] == [("total", 2.0)]
    report = _ledger(home, APRIL, "report", "--day", "2026-03-02").stdout
    assert "per-session[s1]  total   (all time)  (never resets)  $2.00" in report
    metrics = _ledger(home, APRIL, "metrics").stdout
    assert 'ledger_budget_used_usd{budget="per-session",per="s1"} 2.0' in metrics


def test_a_total_budget_is_rebuilt_from_the_chain(tmp_path: Path):
    """rebuild-state folds the chain to the same counters."""
    home = _home(tmp_path)
    _spend_two_dollars_in_march(home)
    _ledger(home, APRIL, "usage")
    before = json.loads(state_path(home).read_text().splitlines()[0])["data"]["budgets"]
    assert _ledger(home, APRIL, "rebuild-state").code == 0
    after = json.loads(state_path(home).read_text().splitlines()[0])["data"]["budgets"]
    assert after["by_name"] == before["by_name"]
    halted = _ledger(home, APRIL, "verdict", "1.5", "--provider", "anthropic", "--session", "s1")
    assert halted.code == 1


def test_session_and_cycle_id_are_one_value(tmp_path: Path):
    """Both given and equal is fine; different is a bad command line that writes nothing."""
    home = _home(tmp_path)
    same = _ledger(home, MARCH, "verdict", "1", "--session", "s9", "--cycle-id", "s9")
    assert same.code == 0, same.stderr
    size = (home / "events.jsonl").stat().st_size
    for command in (["verdict", "1"], ["record", "1", "--provider", "openai"]):
        clash = _ledger(home, MARCH, *command, "--session", "a", "--cycle-id", "b")
        assert (clash.code, clash.stdout) == (2, "")
        assert (
            clash.stderr == "ledger: --session and --cycle-id name different sessions; give one\n"
        )
    assert (home / "events.jsonl").stat().st_size == size
