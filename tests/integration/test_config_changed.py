"""Every change of caps or budgets is sealed before the first verdict under it (SPEC §21).

On both stores: a home's first verdicts seal nothing more; raising the cap in
``ledger.toml`` seals one ``config.changed`` (before, after, the OS user and
host) ahead of the verdict decided under the new cap, and the chain still
verifies and explains.
"""

import getpass
import json
import socket

from tests.gate_helpers import chain_lines, env_at
from tests.pg import STORES

BUDGET = '\n[[budgets]]\nname = "research"\nusd = 5\nperiod = "day"\nmatch = { agent = "r-*" }\n'


def _entries(home):
    return [json.loads(line) for line in chain_lines(home)]


def _hash(home, index: int) -> str:
    from ledger.core.envelope import parse_line

    return parse_line(chain_lines(home)[index]).entry_hash


def _set_cap(home, old: str, new: str) -> None:
    path = home / "ledger.toml"
    path.write_text(path.read_text().replace(f"daily_cap = {old}", f"daily_cap = {new}"))


@STORES
def test_a_raised_cap_and_a_new_budget_are_sealed_before_the_verdict_under_them(
    home, run_inproc, request
):
    env = env_at(0)
    if "postgres" in request.node.name:
        env.update(request.getfixturevalue("pg_store_env"))

    def run(*args):
        return run_inproc(["--home", str(home), *args], env)

    assert run("verdict", "1").code == 0
    assert run("verdict", "1").code == 0
    assert [e["event_type"] for e in _entries(home)] == ["budget.allow", "budget.allow"]

    _set_cap(home, "100", "250")
    raised = run("verdict", "1").json()
    assert raised["daily_cap_micros"] == 250_000_000
    entries = _entries(home)
    assert [e["event_type"] for e in entries[2:]] == ["config.changed", "budget.allow"]
    change = entries[2]["payload"]
    assert change["before"]["usd"]["daily_cap"] == "100"
    assert change["after"]["usd"]["daily_cap"] == "250"
    assert change["after"]["budgets"] == []
    assert change["scope"] == "host"
    assert change["user"] == getpass.getuser()
    assert change["host"] == socket.gethostname()

    # Unchanged caps seal nothing more; a new budget is a change too.
    assert run("verdict", "1").code == 0
    assert len(_entries(home)) == 5
    (home / "ledger.toml").write_text((home / "ledger.toml").read_text() + BUDGET)
    assert run("verdict", "1", "--agent", "r-1").code == 0
    entries = _entries(home)
    assert [e["event_type"] for e in entries[5:]] == ["config.changed", "budget.allow"]
    budgets = entries[5]["payload"]["after"]["budgets"]
    assert budgets == [{"name": "research", "usd": "5", "period": "day", "match": {"agent": "r-*"}}]
    assert entries[5]["payload"]["before"] == change["after"]

    assert run("verify-chain").stdout == "OK 7 entries\n"
    # Explained later, under other caps in ledger.toml: the verdict is
    # recomputed under the caps sealed before it.
    _set_cap(home, "250", "100")
    explained = run("explain", raised["verdict_ref"], "--json")
    assert explained.code == 0, explained.stdout + explained.stderr
    assert explained.json()["differences"] == []
    assert explained.json()["config"] == "caps sealed in the chain"
    # A config.changed is named, not explained as a verdict.
    assert "is a config.changed, not a verdict" in run("explain", _hash(home, 5)).stderr


@STORES
def test_an_environment_override_of_the_cap_is_a_change_too(home, run_inproc, request):
    env = env_at(0)
    if "postgres" in request.node.name:
        env.update(request.getfixturevalue("pg_store_env"))
    assert run_inproc(["--home", str(home), "verdict", "1"], env).code == 0
    raised = {**env, "LEDGER_USD_DAILY_CAP": "300"}
    assert run_inproc(["--home", str(home), "verdict", "1"], raised).code == 0
    kinds = [e["event_type"] for e in _entries(home)]
    assert kinds == ["budget.allow", "config.changed", "budget.allow"]
    assert _entries(home)[1]["payload"]["after"]["usd"]["daily_cap"] == "300"
