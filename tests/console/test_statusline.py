"""``ledger statusline`` for Claude Code, and ``hook install`` adding it without replacing one."""

import json
from pathlib import Path

from tests.conftest import clean_env, run_process

NOW = "2026-06-01T12:00:00Z"


def _ledger(home: Path, *args: str, stdin: str | None = None) -> str:
    result = run_process(["--home", str(home), *args], clean_env(LEDGER_NOW=NOW), stdin=stdin)
    assert result.code == 0, result.stderr
    return result.stdout


def test_statusline_shows_the_sessions_recorded_spend_and_the_tightest_cap(tmp_path):
    """The session's spend is the ledger's records, not the client's cost; the left is the cap's."""
    home = tmp_path / "home"
    _ledger(home, "init", "--daily-cap-usd", "2", "--billing", "none")
    _ledger(home, "record", "0.25", "--provider", "anthropic", "--cycle-id", "s-1")
    _ledger(home, "record", "0.50", "--provider", "anthropic", "--cycle-id", "other")
    status = {"session_id": "s-1", "cost": {"total_cost_usd": 99.0}, "model": {"id": "x"}}
    line = _ledger(home, "statusline", stdin=json.dumps(status))
    assert line == "ledger · session $0.25 · $1.25 left of aggregate · resets 00:00 UTC\n"
    assert "\n" not in line[:-1]
    unknown = _ledger(home, "statusline", stdin="not json")
    assert unknown == "ledger · $1.25 left of aggregate · resets 00:00 UTC\n"


def test_statusline_names_a_tighter_session_budget(tmp_path):
    """A per-session budget with less left than the day's cap is the one shown."""
    home = tmp_path / "home"
    _ledger(home, "init", "--daily-cap-usd", "10", "--billing", "none")
    with (home / "ledger.toml").open("a") as toml:
        toml.write(
            '\n[[budgets]]\nname = "per-session"\nusd = 1\nperiod = "day"\nper = "session"\n'
        )
    _ledger(home, "record", "0.40", "--provider", "anthropic", "--cycle-id", "s-2")
    line = _ledger(home, "statusline", stdin='{"session_id": "s-2"}')
    assert line.startswith("ledger · session $0.40 · $0.60 left of budget:per-session[s-2]")


def test_hook_install_adds_a_statusline_only_when_none_is_set(tmp_path):
    """A settings file without statusLine gets ledger's; one with its own keeps it, and says so."""
    home = tmp_path / "home"
    _ledger(home, "init", "--daily-cap-usd", "1", "--billing", "none")
    fresh = tmp_path / "fresh.json"
    added = json.loads(_ledger(home, "hook", "install", "--settings", str(fresh)))
    assert added["statusline"] == "added"
    command = json.loads(fresh.read_text())["statusLine"]["command"]
    assert command.endswith(f"--home {home.resolve()} statusline")
    again = json.loads(_ledger(home, "hook", "install", "--settings", str(fresh)))
    assert again["changed"] is False
    theirs = tmp_path / "theirs.json"
    theirs.write_text(json.dumps({"statusLine": {"type": "command", "command": "my-line"}}))
    kept = json.loads(_ledger(home, "hook", "install", "--settings", str(theirs)))
    assert kept["statusline"].startswith("kept")
    assert json.loads(theirs.read_text())["statusLine"]["command"] == "my-line"
