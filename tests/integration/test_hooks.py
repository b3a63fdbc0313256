"""``ledger hook pre-tool-use`` / ``post-tool-use`` fed real Claude Code hook JSON."""

import datetime as dt
import fcntl
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_agent_helpers import (
    assert_chain_verifies,
    cli,
    event_types,
    payloads,
    process_env,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hooks"
PRE = (FIXTURES / "pre_tool_use_bash.json").read_text()
POST = (FIXTURES / "post_tool_use_bash.json").read_text()
NOW = dt.datetime(2026, 11, 22, 8, 0, tzinfo=dt.UTC)
NOW_ENV = {"LEDGER_NOW": "2026-11-22T08:00:00Z"}


def pre(run_inproc, home, env, stdin=PRE):
    return cli(run_inproc, home, "hook", "pre-tool-use", env=NOW_ENV | env, stdin=stdin)


def post(run_inproc, home, env, stdin=POST):
    return cli(run_inproc, home, "hook", "post-tool-use", env=NOW_ENV | env, stdin=stdin)


def test_pre_counts_the_tool_call_and_denies_when_exhausted(home, run_inproc):
    cli(run_inproc, home, "tools", "create", "explorer-1", "--role", "explorer", env=NOW_ENV)
    env = {"LEDGER_AGENT": "explorer-1"}
    for name in (
        "pre_tool_use_bash.json",
        "pre_tool_use_edit.json",
        "pre_tool_use_mcp.json",
        "pre_tool_use_bash.json",
    ):
        allowed = pre(run_inproc, home, env, (FIXTURES / name).read_text())
        assert allowed.code == 0
        assert allowed.json() == {}
    denied = pre(run_inproc, home, env)
    assert denied.code == 0
    output = denied.json()
    assert output["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    assert output["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert output["hookSpecificOutput"]["permissionDecisionReason"] == (
        "Tool-call budget exhausted for agent explorer-1 (explorer): Budget: 4/4. "
        'Return partial results with status: "partial".'
    )
    sealed = payloads(home, "hook.pre_tool_use")
    assert [p["tool_call"] for p in sealed] == ["counted"] * 4 + ["refused"]
    assert [p["decision"] for p in sealed] == ["allow"] * 4 + ["deny"]
    assert [p["tool_name"] for p in sealed][:3] == ["Bash", "Edit", "mcp__github__create_issue"]
    assert sealed[0]["session_id"] == "8c3f2a51-6f0e-4d7b-9a61-2b9f4d1e7c30"
    check = cli(run_inproc, home, "tools", "check", "explorer-1", env=NOW_ENV)
    assert (check.code, check.json()["budget_used"], check.json()["refused_calls"]) == (1, 4, 1)
    assert_chain_verifies(run_inproc, home)


def test_pre_counts_turns_and_warns_without_deciding(home, run_inproc):
    cli(run_inproc, home, "turns", "create", "wf", "--total", "100", "--phase", "5", env=NOW_ENV)
    env = {"LEDGER_WORKFLOW": "wf"}
    for _ in range(3):
        assert pre(run_inproc, home, env).json() == {}
    warned = pre(run_inproc, home, env).json()  # 4/5 = 80 % of the phase
    assert "permissionDecision" not in warned["hookSpecificOutput"]
    assert warned["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    context = warned["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("BUDGET WARNING: Approaching limit.\n  Total: 4/100 turns (4%)\n")
    assert warned["systemMessage"] == context
    exceeded = pre(run_inproc, home, env).json()
    assert exceeded["hookSpecificOutput"]["additionalContext"].startswith("BUDGET EXCEEDED:")
    assert "permissionDecision" not in exceeded["hookSpecificOutput"]
    check = cli(run_inproc, home, "turns", "check", "wf", env=NOW_ENV).json()
    assert (check["effective_total"], check["effective_phase"]) == (5, 5)
    assert event_types(home).count("hook.pre_tool_use") == 5


def test_pre_with_both_scopes_seals_one_envelope_per_call(home, run_inproc):
    cli(run_inproc, home, "turns", "create", "wf", "--total", "10", "--phase", "10", env=NOW_ENV)
    cli(run_inproc, home, "tools", "create", "b", "--role", "builder", env=NOW_ENV)
    before = len(event_types(home))
    env = {"LEDGER_WORKFLOW": "wf", "LEDGER_AGENT": "b"}
    for _ in range(6):
        pre(run_inproc, home, env)
    # Each call: the session's USD verdict, then one envelope counting turn and tool call.
    assert event_types(home)[before:] == ["budget.allow", "hook.pre_tool_use"] * 6
    # The sixth call was denied: it is neither a counted tool call nor a turn.
    assert cli(run_inproc, home, "turns", "check", "wf", env=NOW_ENV).json()["effective_total"] == 5
    assert cli(run_inproc, home, "tools", "check", "b", env=NOW_ENV).json()["budget_used"] == 5


def test_pre_expired_countdown_warns(home, run_inproc):
    end = str(int(NOW.timestamp()) - 1)
    output = pre(run_inproc, home, {"LEDGER_BUDGET_END": end}).json()
    assert output["hookSpecificOutput"]["additionalContext"] == (
        "▲▲▲ BUDGET EXPIRED — COMMIT NOW AND EXIT ▲▲▲"
    )
    assert "permissionDecision" not in output["hookSpecificOutput"]
    assert event_types(home) == ["budget.allow"]  # the USD verdict; nothing to count


def test_post_reports_countdown_and_budget_lines(home, run_inproc):
    cli(run_inproc, home, "tools", "create", "b", "--role", "builder", "--files", "2", env=NOW_ENV)
    cli(run_inproc, home, "turns", "create", "wf", "--total", "50", "--phase", "10", env=NOW_ENV)
    env = {
        "LEDGER_AGENT": "b",
        "LEDGER_WORKFLOW": "wf",
        "LEDGER_BUDGET_END": str(int(NOW.timestamp()) + 192),
    }
    pre(run_inproc, home, env)
    result = post(run_inproc, home, env)
    assert result.code == 0
    assert result.json() == {
        "hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "additionalContext": (
                "▲ BUDGET: 3m12s — wrap up and commit soon\n"
                "Budget: 1/6, Action: Bash\n"
                "Turns: 1/50 total (2%), 1/10 phase (10%)"
            ),
        }
    }
    before = event_types(home)
    post(run_inproc, home, env, (FIXTURES / "post_tool_use_write.json").read_text())
    assert event_types(home) == before  # PostToolUse writes nothing


@pytest.mark.parametrize(
    ("remaining", "line"),
    [
        (1200, "BUDGET: 20m remaining"),
        (300, "▲ BUDGET: 5m — wrap up and commit soon"),
        (119, "▲▲▲ BUDGET: 1m59s — STOP EDITING, COMMIT NOW, EXIT ▲▲▲"),
        (0, "▲▲▲ BUDGET EXPIRED — COMMIT NOW AND EXIT ▲▲▲"),
    ],
)
def test_post_countdown_tiers(home, run_inproc, remaining, line):
    env = {"LEDGER_BUDGET_END": str(int(NOW.timestamp()) + remaining)}
    result = post(run_inproc, home, env, (FIXTURES / "post_tool_use_read.json").read_text())
    assert result.json()["hookSpecificOutput"]["additionalContext"] == line


def test_post_uses_time_start_when_no_variable(home, run_inproc):
    cli(run_inproc, home, "time", "start", "--budget-seconds", "600", env=NOW_ENV)
    result = post(run_inproc, home, {})
    assert result.json()["hookSpecificOutput"]["additionalContext"] == "BUDGET: 10m remaining"


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("malformed_*")))
@pytest.mark.parametrize("command", ["pre-tool-use", "post-tool-use"])
def test_malformed_stdin_is_one_stderr_line_exit_0_no_decision(home, run_inproc, name, command):
    cli(run_inproc, home, "tools", "create", "b", "--role", "builder", env=NOW_ENV)
    result = cli(
        run_inproc,
        home,
        "hook",
        command,
        env={"LEDGER_AGENT": "b"},
        stdin=(FIXTURES / name).read_text(),
    )
    assert result.code == 0
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("ledger: hook ")
    assert event_types(home) == ["tools.budget_created"]


def test_untrusted_counter_denies(home, run_inproc):
    cli(run_inproc, home, "tools", "create", "b", "--role", "builder", env=NOW_ENV)
    pre(run_inproc, home, {"LEDGER_AGENT": "b"})
    state = home / "state" / "derived.json"
    state.write_bytes(state.read_bytes().replace(b'"used":1', b'"used":0'))
    output = pre(run_inproc, home, {"LEDGER_AGENT": "b"}).json()
    # The USD gate cannot trust its counter either: the session stops.
    assert output["continue"] is False
    assert "counter_inconsistent" in output["stopReason"]


def test_lock_timeout_halts_the_usd_verdict(home, run_inproc):
    env = {"LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS": "0"}
    with (home / "events.jsonl.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        denied = pre(run_inproc, home, env)
    assert denied.json()["continue"] is False
    reason = denied.json()["stopReason"]
    assert reason.startswith("ledger: USD budget halt-uncertainty (counter_inconsistent)")
    assert "verdict not recorded" in reason
    assert "fail-closed" in reason
    assert denied.stderr.startswith("ledger: verdict not recorded: ")


def test_lock_timeout_denies_for_an_agent_and_warns_otherwise(tmp_path, run_inproc):
    home = tmp_path / "no-cap"  # USD gating off: the agent budgets alone decide
    assert cli(run_inproc, home, "init").code == 0
    cli(run_inproc, home, "tools", "create", "b", "--role", "builder", env=NOW_ENV)
    cli(run_inproc, home, "turns", "create", "wf", "--total", "9", "--phase", "9", env=NOW_ENV)
    env = {"LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS": "0"}
    with (home / "events.jsonl.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        denied = pre(run_inproc, home, env | {"LEDGER_AGENT": "b"})
        warned = pre(run_inproc, home, env | {"LEDGER_WORKFLOW": "wf"})
    assert denied.code == 0
    reason = denied.json()["hookSpecificOutput"]["permissionDecisionReason"]
    assert "could not record" in reason
    assert "fail-closed" in reason
    assert warned.code == 0
    assert "permissionDecision" not in warned.json()["hookSpecificOutput"]
    assert "could not record" in warned.json()["systemMessage"]
    assert denied.stderr.startswith("ledger: ")


def test_invalid_agent_variable_denies(home, run_inproc):
    output = pre(run_inproc, home, {"LEDGER_AGENT": "not valid!"}).json()
    assert output["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "LEDGER_AGENT" in output["hookSpecificOutput"]["permissionDecisionReason"]


def test_no_scope_prints_an_empty_object(home, run_inproc):
    assert pre(run_inproc, home, {}).json() == {}
    assert post(run_inproc, home, {}).json() == {}
    assert event_types(home) == ["budget.allow"]  # the session's USD verdict


def test_real_processes(home, run_inproc):
    cli(run_inproc, home, "tools", "create", "e", "--role", "explorer", env=NOW_ENV)
    env = process_env(LEDGER_AGENT="e", LEDGER_HOME=str(home), **NOW_ENV)
    outputs = []
    for _ in range(5):
        proc = subprocess.run(
            [sys.executable, "-m", "ledger", "hook", "pre-tool-use"],
            input=PRE,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(json.loads(proc.stdout))
    assert outputs[:4] == [{}] * 4
    assert outputs[4]["hookSpecificOutput"]["permissionDecision"] == "deny"
    # tools.budget_created, then per call a USD verdict and the counted call
    assert assert_chain_verifies(run_inproc, home) == 11
