"""``ledger turns``: seed 000's advisory thresholds and messages through the CLI."""

from tests.integration.test_agent_helpers import assert_chain_verifies, cli, event_types, payloads


def record(run_inproc, home, workflow, times, kind="tool_use"):
    for _ in range(times):
        result = cli(run_inproc, home, "turns", "record", workflow, "--type", kind)
        assert result.code == 0, result.stderr


def test_thresholds_at_79_80_99_100_percent(home, run_inproc):
    cli(run_inproc, home, "turns", "create", "wf", "--total", "100", "--phase", "1000")
    record(run_inproc, home, "wf", 79)
    check = cli(run_inproc, home, "turns", "check", "wf")
    assert (check.code, check.json()["verdict"], check.json()["total_pct"]) == (0, "ok", 79)
    assert check.json()["message"] == "Turns: 79/100 total (79%), 79/1000 phase (7%)"
    record(run_inproc, home, "wf", 1)
    warn = cli(run_inproc, home, "turns", "check", "wf")
    assert (warn.code, warn.json()["verdict"]) == (0, "warning")
    assert warn.json()["message"] == (
        "BUDGET WARNING: Approaching limit.\n"
        "  Total: 80/100 turns (80%)\n"
        "  Phase: 80/1000 turns (8%)\n"
        "  Remaining: ~20 turns before limit.\n"
        "Prioritize completing current task. Consider saving progress."
    )
    record(run_inproc, home, "wf", 19)
    assert cli(run_inproc, home, "turns", "check", "wf").json()["verdict"] == "warning"
    record(run_inproc, home, "wf", 1, kind="delegation")
    exceeded = cli(run_inproc, home, "turns", "check", "wf")
    assert exceeded.code == 0  # advisory: never blocks
    body = exceeded.json()
    assert (body["verdict"], body["allowed"], body["advisory"]) == ("exceeded", True, True)
    assert body["message"] == (
        "BUDGET EXCEEDED: Turn limit reached.\n"
        "  Total: 100/100 turns (100%)\n"
        "  Phase: 100/1000 turns (10%)\n"
        "ACTION REQUIRED: Save current state to WORKFLOW_STATE.yaml and PROGRESS.md, then stop.\n"
        "Use /team-shinchan:budget --reset to start a new budget cycle if needed."
    )
    assert len(body["check_ref"]) == 64
    assert [p["verdict"] for p in payloads(home, "turns.check")] == [
        "ok",
        "warning",
        "warning",
        "exceeded",
    ]
    assert assert_chain_verifies(run_inproc, home) == 1 + 100 + 4


def test_phase_percent_decides_when_higher_and_a_phase_restarts_the_count(home, run_inproc):
    cli(run_inproc, home, "turns", "create", "wf", "--total", "200", "--phase", "10")
    record(run_inproc, home, "wf", 8, kind="file_change")
    body = cli(run_inproc, home, "turns", "record", "wf").json()
    assert (body["verdict"], body["phase_pct"], body["total_pct"]) == ("warning", 90, 4)
    record(run_inproc, home, "wf", 1)
    assert cli(run_inproc, home, "turns", "check", "wf").json()["verdict"] == "exceeded"
    phase = cli(run_inproc, home, "turns", "phase", "wf", "implement", "--phase", "20")
    assert phase.code == 0
    assert (phase.json()["phase_name"], phase.json()["effective_phase"], phase.json()["phase"]) == (
        "implement",
        0,
        20,
    )
    after = cli(run_inproc, home, "turns", "check", "wf").json()
    assert (after["verdict"], after["effective_total"], after["effective_phase"]) == ("ok", 10, 0)
    assert payloads(home, "turns.phase_started")[0]["previous_phase_turns"] == 10


def test_no_budget_is_allowed_and_says_so(home, run_inproc):
    check = cli(run_inproc, home, "turns", "check", "nowhere")
    assert check.code == 0
    assert check.json()["budget_applies"] is False
    assert check.json()["verdict"] == "no_budget"
    assert "no turn budget applies" in check.json()["message"]
    recorded = cli(run_inproc, home, "turns", "record", "nowhere")
    assert (recorded.code, recorded.json()["budget_applies"]) == (0, False)
    assert cli(run_inproc, home, "turns", "phase", "nowhere", "x").code == 1


def test_create_again_starts_a_new_budget_cycle(home, run_inproc):
    cli(run_inproc, home, "turns", "create", "wf", "--total", "10", "--phase", "5")
    record(run_inproc, home, "wf", 5)
    again = cli(run_inproc, home, "turns", "create", "wf", "--total", "10", "--phase", "5")
    assert again.json()["replaced"] is True
    assert cli(run_inproc, home, "turns", "check", "wf").json()["effective_total"] == 0


def test_bad_command_lines(home, run_inproc):
    for args in (
        ["turns", "create", "wf", "--total", "0", "--phase", "5"],
        ["turns", "create", "wf", "--total", "-1", "--phase", "5"],
        ["turns", "create", "wf", "--total", "10"],
        ["turns", "record", "wf", "--type", "thinking"],
        ["turns", "phase", "wf", ""],
    ):
        result = cli(run_inproc, home, *args)
        assert result.code == 2, args
    assert event_types(home) == []
