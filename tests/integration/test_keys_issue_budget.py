"""`keys issue NAME --budget NAME=USD`: the new key's own cap, written as its `usd_for` entry."""

import tomllib
from pathlib import Path

import pytest

from tests.conftest import Result

ENV = {"LEDGER_NOW": "2026-03-02T10:00:00Z", "LEDGER_BILLING_STALE_HALT_PCT": "100"}
BUDGETS = """
# Each developer's key: $1 a day unless named below.
[[budgets]]
name = "team"
usd = 1
period = "day"
per = "key"
usd_for = { "ci-*" = 20 }  # the CI keys

[[budgets]]
name = "agents"
usd = 3
period = "day"
per = "agent"
"""


@pytest.fixture
def config(home: Path) -> Path:
    path = home / "ledger.toml"
    path.write_text(path.read_text() + BUDGETS)
    return path


def issue(run_inproc, home: Path, *args: str) -> Result:
    result: Result = run_inproc(["--home", str(home), "keys", "issue", *args], env=ENV)
    return result


def verdict(run_inproc, home: Path, usd: str, key: str) -> str:
    done = run_inproc(["--home", str(home), "verdict", usd, "--key", key], env=ENV)
    assert done.code in (0, 1), done.stderr
    return str(done.json()["verdict"])


def test_the_key_gets_its_own_cap_ahead_of_the_globs(run_inproc, home, config):
    done = issue(run_inproc, home, "ci-alice", "--budget", "team=2.5")

    assert done.code == 0, done.stderr
    assert done.json()["key"].startswith("lk_")
    text = config.read_text()
    # Written as by hand, everything else kept: the comments, the other budget.
    assert "# Each developer's key" in text
    assert "# the CI keys" in text
    team = tomllib.loads(text)["budgets"][0]
    assert list(team["usd_for"].items()) == [("ci-alice", 2.5), ("ci-*", 20)]
    # "ci-*" would give it $20: its own entry comes first and decides.
    assert verdict(run_inproc, home, "3", "ci-alice") == "halt-100"
    assert verdict(run_inproc, home, "2", "ci-alice") == "allow"
    assert verdict(run_inproc, home, "3", "ci-bob") == "allow"


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("agents=5", "has per = 'agent', not \"key\""),
        ("nope=5", "no budget named 'nope' (budgets: team, agents)"),
        ("team", "expected NAME=USD"),
        ("team=lots", "not a number"),
        ("team=-1", "must be a number ≥ 0"),
    ],
)
def test_a_budget_that_cannot_take_the_key_is_one_line_and_a_usage_exit(
    run_inproc, home, config, option, said
):
    before = config.read_bytes()

    done = issue(run_inproc, home, "alice", "--budget", option)

    assert done.code == 2, done.stderr
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert config.read_bytes() == before
    listed = run_inproc(["--home", str(home), "keys", "list"], env=ENV).json()["keys"]
    assert listed == []


def test_a_name_already_issued_changes_no_cap(run_inproc, home, config):
    assert issue(run_inproc, home, "alice").code == 0
    before = config.read_bytes()

    done = issue(run_inproc, home, "alice", "--budget", "team=50")

    assert done.code == 2
    assert "already issued" in done.stderr
    assert config.read_bytes() == before


def test_a_console_key_takes_no_budget(run_inproc, home, config):
    done = issue(run_inproc, home, "lead", "--role", "admin", "--budget", "team=5")

    assert done.code == 2
    assert "console key" in done.stderr
