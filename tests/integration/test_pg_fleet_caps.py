"""A fleet's caps and budgets live in its store (SPEC §21): pushed once, every host has them.

Real PostgreSQL (``tests.pg``); each host is a home of its own on one schema.
"""

import json

from tests.gate_helpers import chain_lines, env_at
from tests.pg import copy_fleet_secret

FLEET = """[usd]
daily_cap = 40
provider_caps = { openai = 15 }

[[budgets]]
name = "research"
usd = 3
period = "day"
match = { agent = "research-*" }
"""


def _hosts(tmp_path, run_inproc, pg_store_env):
    url = pg_store_env["LEDGER_STORE_URL"]
    env = {"LEDGER_STORE_SCHEMA": pg_store_env["LEDGER_STORE_SCHEMA"]}
    first, second = tmp_path / "host1", tmp_path / "host2"

    def run(home, *args, extra=None):
        return run_inproc(["--home", str(home), *args], {**env_at(0), **env, **(extra or {})})

    made = run(first, "init", "--store", url, "--daily-cap-usd", "50")
    assert made.code == 0, made.stderr
    assert made.json()["fleet_caps"] is False
    return first, second, url, run


def test_a_joining_host_has_the_fleet_caps_at_its_first_verdict(tmp_path, run_inproc, pg_store_env):
    first, second, url, run = _hosts(tmp_path, run_inproc, pg_store_env)
    fleet_file = tmp_path / "fleet.toml"
    fleet_file.write_text(FLEET)
    # The first host's own ledger.toml says $50: pushing other caps is refused until it
    # keeps host settings only.
    refused = run(first, "config", "push", str(fleet_file))
    assert refused.code == 78
    assert "remove them from" in refused.stderr
    toml = (first / "ledger.toml").read_text()
    start, end = toml.index("[usd]\n"), toml.index("[billing]\n")
    (first / "ledger.toml").write_text(toml[:start] + toml[end:])
    pushed = run(first, "config", "push", str(fleet_file))
    assert pushed.code == 0, pushed.stderr
    assert pushed.json()["changed"] is True
    assert pushed.json()["after"]["usd"]["daily_cap"] == "40"
    again = run(first, "config", "push", str(fleet_file))
    assert again.json()["changed"] is False

    copy_fleet_secret(first, second)
    joined = run(second, "init", "--store", url)
    assert joined.code == 0, joined.stderr
    assert joined.json()["fleet_caps"] is True
    assert "[usd]" not in (second / "ledger.toml").read_text().replace("# [usd]", "")
    verdict = run(second, "verdict", "1")
    assert verdict.code == 0, verdict.stderr
    assert verdict.json()["daily_cap_micros"] == 40_000_000
    assert run(second, "verdict", "16", "--provider", "openai").json()["verdict"] == "halt-100"
    research = run(second, "verdict", "4", "--agent", "research-1").json()
    assert research["verdict"] == "halt-100"
    assert research["deciding_cap"].startswith("budget:research")

    entries = [json.loads(line) for line in chain_lines(second)]
    changed = [e for e in entries if e["event_type"] == "config.changed"]
    assert len(changed) == 1
    assert changed[0]["payload"]["scope"] == "fleet"
    assert run(second, "verify-chain").code == 0

    # A host whose own file or environment says other caps is refused (fail closed).
    assert run(second, "verdict", "1", extra={"LEDGER_USD_DAILY_CAP": "500"}).code == 78
    path = second / "ledger.toml"
    path.write_text(path.read_text() + '\n[[budgets]]\nname = "x"\nusd = 1\nperiod = "day"\n')
    stray = run(second, "verdict", "1")
    assert stray.code == 78
    assert "config push" in stray.stderr


def test_a_joining_host_cannot_name_another_daily_cap(tmp_path, run_inproc, pg_store_env):
    first, second, url, run = _hosts(tmp_path, run_inproc, pg_store_env)
    assert run(first, "config", "push").code == 0  # this host's own [usd]: $50
    copy_fleet_secret(first, second)
    refused = run(second, "init", "--store", url, "--daily-cap-usd", "99")
    assert refused.code == 2
    assert "this fleet's usd.daily_cap is 50" in refused.stderr
    assert run(first, "verdict", "1").json()["daily_cap_micros"] == 50_000_000


def test_config_push_refuses_a_file_home_and_host_tables(tmp_path, run_inproc):
    home = tmp_path / "home"
    assert run_inproc(["--home", str(home), "init", "--daily-cap-usd", "5"]).code == 0
    refused = run_inproc(["--home", str(home), "config", "push"])
    assert refused.code == 2
    assert "events.jsonl" in refused.stderr
