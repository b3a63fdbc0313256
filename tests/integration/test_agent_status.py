"""``ledger status``: every active budget, as a table and as JSON."""

import datetime as dt

from tests.integration.test_agent_helpers import cli, event_types

NOW_ENV = {"LEDGER_NOW": "2026-11-22T08:00:00Z"}


def test_status_shows_every_budget(home, run_inproc):
    cli(run_inproc, home, "verdict", "2.5", env=NOW_ENV)
    cli(run_inproc, home, "tokens", "create", "c", "--convoy-max", "1000", env=NOW_ENV)
    cli(run_inproc, home, "tokens", "check", "c", "a", "100", env=NOW_ENV)
    cli(run_inproc, home, "turns", "create", "wf", "--total", "10", "--phase", "5", env=NOW_ENV)
    cli(run_inproc, home, "turns", "record", "wf", env=NOW_ENV)
    cli(run_inproc, home, "tools", "create", "b", "--role", "builder", env=NOW_ENV)
    cli(run_inproc, home, "tools", "use", "b", env=NOW_ENV)
    cli(run_inproc, home, "time", "start", "--budget-seconds", "1200", env=NOW_ENV)
    before = event_types(home)
    as_json = cli(run_inproc, home, "status", "--json", env=NOW_ENV)
    assert as_json.code == 0, as_json.stderr
    document = as_json.json()
    assert document["usd"]["daily_cap_usd"] == 100.0
    assert document["usd"]["usd_reserved"] == 2.5
    assert [c["convoy"] for c in document["convoys"]] == ["c"]
    assert document["convoys"][0]["reserved_tokens"] == 100
    assert document["workflows"][0]["effective_total"] == 1
    assert document["agents"][0]["message"] == "Budget: 1/5"
    assert document["time"]["message"] == "BUDGET: 20m remaining"
    table = cli(run_inproc, home, "status", env=NOW_ENV)
    assert table.code == 0
    assert "USD, budget day 2026-11-22:" in table.stdout
    assert "aggregate  day     $100.00  $0.00  $2.50     2.5%   $97.50" in table.stdout
    for text in (
        "Token budgets",
        "Turn budgets",
        "Tool-call budgets",
        "Budget: 1/5",
        "BUDGET: 20m remaining",
    ):
        assert text in table.stdout
    assert event_types(home) == before  # status writes nothing


def test_status_of_a_fresh_home(home, run_inproc):
    document = cli(run_inproc, home, "status", "--json").json()
    assert (document["convoys"], document["workflows"], document["agents"], document["time"]) == (
        [],
        [],
        [],
        None,
    )
    end = int(dt.datetime(2026, 11, 22, 8, 5, tzinfo=dt.UTC).timestamp())
    env = NOW_ENV | {"LEDGER_BUDGET_END": str(end)}
    assert cli(run_inproc, home, "status", "--json", env=env).json()["time"]["tier"] == "wrap_up"
    assert cli(run_inproc, home, "status", env={"LEDGER_BUDGET_END": "x"}).code == 78


def test_derived_state_is_a_replay_of_the_chain(home, run_inproc):
    for args in (
        ["tokens", "create", "c", "--agent-max", "1000"],
        ["tokens", "check", "c", "a", "300"],
        ["tokens", "record", "c", "a", "100", "50"],
        ["turns", "create", "wf", "--total", "10", "--phase", "4"],
        ["turns", "record", "wf"],
        ["turns", "phase", "wf", "build"],
        ["tools", "create", "e", "--role", "explorer"],
        ["tools", "use", "e"],
        ["tools", "use", "e", "--exempt"],
        ["time", "start", "--budget-seconds", "600"],
    ):
        assert cli(run_inproc, home, *args, env=NOW_ENV).code == 0, args
    before = cli(run_inproc, home, "status", "--json", env=NOW_ENV).json()
    (home / "state" / "derived.json").unlink()
    after = cli(run_inproc, home, "status", "--json", env=NOW_ENV).json()
    assert after == before
    rebuilt = cli(run_inproc, home, "rebuild-state", env=NOW_ENV)
    assert rebuilt.code == 0, rebuilt.stderr
    assert cli(run_inproc, home, "status", "--json", env=NOW_ENV).json() == before


def test_status_shows_every_cap_to_the_cent_and_never_a_negative_amount_left(home, run_inproc):
    """Aggregate and each provider cap are rows; $ to the cent, % to one decimal, no $-0.05."""
    env = NOW_ENV | {"LEDGER_USD_PROVIDER_CAPS": '{"openai": 5, "anthropic": 3}'}
    recorded = cli(run_inproc, home, "record", "5.051234", "--provider", "openai", env=env)
    assert recorded.code == 0, recorded.stderr
    table = cli(run_inproc, home, "status", env=env)
    assert table.code == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[2:5]}
    assert rows["aggregate"][:7] == [
        "aggregate",
        "day",
        "$100.00",
        "$5.05",
        "$0.00",
        "5.1%",
        "$94.94",
    ]
    assert rows["provider:openai"][:10] == [
        "provider:openai",
        "day",
        "$5.00",
        "$5.05",
        "$0.00",
        "101.0%",
        "$0.00",
        "(over",
        "by",
        "$0.05)",
    ]
    assert rows["provider:anthropic"][2:7] == ["$3.00", "$0.00", "$0.00", "0.0%", "$3.00"]
    assert "$-" not in table.stdout
    exact = cli(run_inproc, home, "status", "--json", env=env).json()["usd"]["caps"]
    openai = next(cap for cap in exact if cap["scope"] == "provider:openai")
    assert openai["usd_remaining_micros"] == -51_234
    assert openai["usd_used_micros"] == 5_051_234
    assert openai["usage_pct"] == 101.0247
    assert [cap["scope"] for cap in exact] == ["aggregate", "provider:anthropic", "provider:openai"]
