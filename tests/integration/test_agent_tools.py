"""``ledger tools``: role budgets, exempt actions, exhaustion (seed 001)."""

import pytest

from tests.integration.test_agent_helpers import assert_chain_verifies, cli, event_types, payloads


@pytest.mark.parametrize(
    ("args", "budget"),
    [
        (["--role", "builder"], 5),
        (["--role", "builder", "--framework-confidence", "0.6"], 7),
        (["--role", "builder", "--files", "2"], 6),
        (["--role", "builder", "--files", "3", "--prior-failures"], 9),
        (["--role", "builder", "--framework-confidence", "0.59"], 5),
        (["--role", "explorer"], 4),
        (["--role", "observer"], 10),
        (["--role", "planner"], None),
    ],
)
def test_create_budget_by_role(home, run_inproc, args, budget):
    result = cli(run_inproc, home, "tools", "create", "agent-1", *args)
    assert result.code == 0, result.stderr
    assert result.json()["budget"] == budget
    assert result.json()["message"] == f"Budget: 0/{'unlimited' if budget is None else budget}"


def test_use_until_exhausted_then_refused_exempt_still_admitted(home, run_inproc):
    cli(run_inproc, home, "tools", "create", "b1", "--role", "builder")
    for used in range(1, 6):
        use = cli(run_inproc, home, "tools", "use", "b1")
        assert use.code == 0
        assert use.json()["message"] == f"Budget: {used}/5"
    check = cli(run_inproc, home, "tools", "check", "b1")
    assert check.code == 1
    assert check.json()["allowed"] is False
    assert check.json()["message"] == "Budget: 5/5"
    assert "GOTO BLOCK" in check.json()["reason"]
    refused = cli(run_inproc, home, "tools", "use", "b1")
    assert (refused.code, refused.json()["allowed"], refused.json()["outcome"]) == (
        1,
        False,
        "refused",
    )
    exempt = cli(run_inproc, home, "tools", "use", "b1", "--exempt")
    assert (exempt.code, exempt.json()["outcome"], exempt.json()["message"]) == (
        0,
        "exempt",
        "Budget: 5/5",
    )
    assert [p["outcome"] for p in payloads(home, "tools.use")] == ["counted"] * 5 + [
        "refused",
        "exempt",
    ]
    assert event_types(home).count("tools.check") == 1
    assert_chain_verifies(run_inproc, home)


def test_exempt_actions_do_not_count(home, run_inproc):
    cli(run_inproc, home, "tools", "create", "e1", "--role", "explorer")
    for _ in range(3):
        cli(run_inproc, home, "tools", "use", "e1", "--exempt")
    check = cli(run_inproc, home, "tools", "check", "e1")
    assert (check.code, check.json()["budget_used"], check.json()["exempt_calls"]) == (0, 0, 3)
    assert check.json()["budget_remaining"] == 4


def test_planner_is_unlimited(home, run_inproc):
    cli(run_inproc, home, "tools", "create", "p1", "--role", "planner")
    for _ in range(12):
        assert cli(run_inproc, home, "tools", "use", "p1").code == 0
    check = cli(run_inproc, home, "tools", "check", "p1")
    assert (check.code, check.json()["message"]) == (0, "Budget: 12/unlimited")


def test_unknown_agent_fails_closed(home, run_inproc):
    check = cli(run_inproc, home, "tools", "check", "ghost")
    assert (check.code, check.json()["allowed"]) == (1, False)
    assert "no tool-call budget" in check.json()["message"]
    assert cli(run_inproc, home, "tools", "use", "ghost").code == 1


def test_bad_command_lines(home, run_inproc):
    for args in (
        ["tools", "create", "a", "--role", "wizard"],
        ["tools", "create", "a"],
        ["tools", "create", "a", "--role", "builder", "--files", "-1"],
        ["tools", "create", "a", "--role", "builder", "--framework-confidence", "1.5"],
        ["tools", "create", "a", "--role", "builder", "--framework-confidence", "high"],
        ["tools", "use", "bad/agent"],
    ):
        assert cli(run_inproc, home, *args).code == 2, args
    assert event_types(home) == []
