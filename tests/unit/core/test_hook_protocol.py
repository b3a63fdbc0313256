"""Claude Code hook JSON: parsing real samples and the output shapes."""

import datetime as dt
import json
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from ledger.core.hook_protocol import (
    HookInputError,
    fail_closed_output,
    halt_lift,
    parse_hook_input,
    post_tool_use_output,
    pre_tool_use_output,
    usd_verdict_reason,
    user_prompt_submit_output,
)
from ledger.core.verdict_kind import Verdict

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hooks"


@pytest.mark.parametrize(
    "name", ["pre_tool_use_bash.json", "pre_tool_use_edit.json", "pre_tool_use_mcp.json"]
)
def test_real_pre_tool_use_samples_parse(name):
    raw = (FIXTURES / name).read_bytes()
    hook = parse_hook_input(raw, "PreToolUse")
    document = json.loads(raw)
    assert hook.tool_name == document["tool_name"]
    assert hook.session_id == document["session_id"]
    assert hook.cwd == document["cwd"]
    assert hook.tool_input == document["tool_input"]


@pytest.mark.parametrize(
    "name", ["post_tool_use_bash.json", "post_tool_use_write.json", "post_tool_use_read.json"]
)
def test_real_post_tool_use_samples_parse(name):
    raw = (FIXTURES / name).read_bytes()
    hook = parse_hook_input(raw, "PostToolUse")
    assert hook.tool_response == json.loads(raw)["tool_response"]


def test_text_input_and_missing_event_name_are_accepted():
    hook = parse_hook_input(
        '{"tool_name": "Read", "tool_input": {"file_path": "/x"}}', "PreToolUse"
    )
    assert hook.tool_name == "Read"
    assert hook.session_id is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("malformed_not_json.txt", "not JSON"),
        ("malformed_empty.txt", "not JSON"),
        ("malformed_array.json", "not a JSON object"),
        ("malformed_no_tool_name.json", "tool_name"),
        ("malformed_tool_input.json", "tool_input"),
        ("malformed_other_event.json", "hook_event_name"),
    ],
)
def test_malformed_input_is_refused_with_a_reason(name, reason):
    with pytest.raises(HookInputError, match=reason):
        parse_hook_input((FIXTURES / name).read_bytes(), "PreToolUse")


def test_a_post_sample_is_not_a_pre_input():
    with pytest.raises(HookInputError, match="PostToolUse"):
        parse_hook_input((FIXTURES / "post_tool_use_bash.json").read_bytes(), "PreToolUse")


def test_bad_utf8_and_wrong_types():
    with pytest.raises(HookInputError):
        parse_hook_input(b"\xff\xfe{", "PreToolUse")
    with pytest.raises(HookInputError, match="session_id"):
        parse_hook_input('{"tool_name": "Bash", "session_id": 5}', "PreToolUse")


def test_deny_output_shape():
    assert pre_tool_use_output("budget exhausted", []) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "budget exhausted",
        }
    }
    output = pre_tool_use_output("budget exhausted", ["turn warning"])
    assert (
        output["hookSpecificOutput"]["permissionDecisionReason"] == "budget exhausted\nturn warning"
    )


def test_warnings_never_decide():
    output = pre_tool_use_output(None, ["BUDGET WARNING: Approaching limit."])
    assert "permissionDecision" not in output["hookSpecificOutput"]
    assert output == {
        "systemMessage": "BUDGET WARNING: Approaching limit.",
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "additionalContext": "BUDGET WARNING: Approaching limit.",
        },
    }
    assert pre_tool_use_output(None, []) == {}


def test_post_output_shape():
    assert post_tool_use_output(["▲ BUDGET: 3m12s — wrap up and commit soon", "Budget: 2/5"]) == {
        "hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "additionalContext": "▲ BUDGET: 3m12s — wrap up and commit soon\nBudget: 2/5",
        }
    }
    assert post_tool_use_output([]) == {}


class TestStop:
    def test_stop_input_needs_no_tool(self):
        hook = parse_hook_input((FIXTURES / "stop.json").read_bytes(), "Stop")
        assert (hook.hook_event_name, hook.tool_name) == ("Stop", "")
        assert hook.transcript_path is not None
        assert hook.transcript_path.endswith("8c3f2a51-6f0e-4d7b-9a61-2b9f4d1e7c30.jsonl")

    def test_a_tool_hook_still_needs_its_tool(self):
        raw = (FIXTURES / "stop.json").read_text().replace('"Stop"', '"PreToolUse"')
        with pytest.raises(HookInputError, match="tool_name missing"):
            parse_hook_input(raw, "PreToolUse")

    def test_stop_input_is_not_a_tool_hook_input(self):
        with pytest.raises(HookInputError, match="expected 'PostToolUse'"):
            parse_hook_input((FIXTURES / "stop.json").read_bytes(), "PostToolUse")


VERDICT_DOCUMENT = {
    "verdict": "halt-100", "verdict_ref": "ab" * 32, "utc_day": "2026-11-22",
    "deciding_cap": "aggregate", "daily_cap_micros": 20_000_000,
    "usd_used_micros": 19_995_000, "usd_reserved_micros": 12_345,
    "estimated_micros": 40_000, "usage_pct": 100.2367,
    "uncertainty_reason": None, "diagnostic": None,
}  # fmt: skip


class TestUsdVerdictReason:
    def test_halt_100_names_the_figures(self):
        assert usd_verdict_reason(Verdict.HALT_100, VERDICT_DOCUMENT) == (
            "ledger: USD budget halt-100 for 2026-11-22: aggregate cap $20.0000, "
            "used $19.9950, reserved $0.0123, next call ~$0.0400 (100.2% projected); "
            "tool call refused (verdict abababababababab)"
        )

    def test_halt_uncertainty_names_the_reason_and_fails_closed(self):
        document = {**VERDICT_DOCUMENT, "verdict": "halt-uncertainty", "verdict_ref": None,
                    "uncertainty_reason": "billing_stale", "diagnostic": "no reading"}  # fmt: skip
        assert usd_verdict_reason(Verdict.HALT_UNCERTAINTY, document) == (
            "ledger: USD budget halt-uncertainty (billing_stale): no reading; "
            "tool call refused (fail-closed; verdict not recorded)"
        )

    def test_warn_90(self):
        document = {**VERDICT_DOCUMENT, "verdict": "warn-90", "usage_pct": None}
        assert usd_verdict_reason(Verdict.WARN_90, document).startswith(
            "ledger: USD budget warn-90: aggregate cap $20.0000, used $19.9950"
        )


class TestHaltLift:
    def test_halt_100_lifts_at_the_next_budget_days_midnight_in_its_zone(self):
        document = {**VERDICT_DOCUMENT, "budget_day": "2026-11-22"}
        assert halt_lift(
            Verdict.read(document["verdict"]), document, ZoneInfo("Europe/Berlin"), "Europe/Berlin"
        ) == ("spend resumes when the next budget day begins (2026-11-23 00:00 Europe/Berlin)")

    def test_a_budgets_halt_lifts_when_its_period_ends_in_the_days_zone(self):
        budget = {"name": "monthly", "per_value": None, "period": "month",
                  "period_end": "2026-11-30T23:00:00.000000Z"}  # fmt: skip
        document = {**VERDICT_DOCUMENT, "budget_day": "2026-11-22",
                    "deciding_cap": "budget:monthly", "budgets": [budget]}  # fmt: skip
        assert halt_lift(
            Verdict.read(document["verdict"]), document, ZoneInfo("Europe/Berlin"), "Europe/Berlin"
        ) == ("spend resumes when budget monthly's month ends (2026-12-01 00:00 Europe/Berlin)")

    def test_a_rolling_budgets_halt_lifts_as_spend_leaves_its_window(self):
        budget = {"name": "hourly", "per_value": "s1", "period": "rolling:2h",
                  "period_end": "2026-11-22T08:00:00.000000Z"}  # fmt: skip
        document = {**VERDICT_DOCUMENT, "deciding_cap": "budget:hourly[s1]", "budgets": [budget]}
        window = "spend resumes when enough spend leaves budget hourly's rolling:2h window"
        assert halt_lift(Verdict.read(document["verdict"]), document, dt.UTC, "UTC") == window
        budget["lifts_at"] = "2026-11-22T09:30:00.000000Z"
        assert (
            halt_lift(Verdict.read(document["verdict"]), document, dt.UTC, "UTC")
            == f"{window} (at 2026-11-22 09:30 UTC)"
        )

    def test_a_cap_decides_though_budgets_are_listed(self):
        budget = {"name": "monthly", "period": "month", "period_end": "2026-12-01T00:00:00Z"}
        document = {**VERDICT_DOCUMENT, "budget_day": "2026-11-22", "budgets": [budget]}
        assert halt_lift(Verdict.read(document["verdict"]), document, dt.UTC, "UTC").endswith(
            "(2026-11-23 00:00 UTC)"
        )

    @pytest.mark.parametrize(
        ("reason", "diagnostic", "command"),
        [
            ("counter_inconsistent", "torn last line at byte 9", "`ledger recover`"),
            ("counter_inconsistent", "recorded spend whose price is unknown (1 call)",
             "pricing the model in ledger.toml, then `ledger rebuild-state`"),
            ("counter_inconsistent", "derived state matches no prefix", "`ledger rebuild-state`"),
            ("counter_drift", "drift 9%", "`ledger reconcile --force-reason TEXT`"),
            ("billing_stale", "no reading", "`ledger reconcile`"),
        ],
    )  # fmt: skip
    def test_an_uncertainty_names_the_operator_command(self, reason, diagnostic, command):
        document = {"verdict": "halt-uncertainty", "uncertainty_reason": reason,
                    "diagnostic": diagnostic}  # fmt: skip
        lift = halt_lift(Verdict.read(document["verdict"]), document, dt.UTC, "UTC")
        assert lift.startswith("this halt stays until ")
        assert command in lift
        # Only a fresh bill's uncertainty also waits for the day when spend is over a cap.
        assert ("budget day" in lift) == (reason == "billing_stale")

    def test_billing_stale_without_an_observer_names_both_ways_out(self):
        document = {"verdict": "halt-uncertainty", "uncertainty_reason": "billing_stale",
                    "diagnostic": "aggregate: ...; no billing observer is configured: ..."}  # fmt: skip
        lift = halt_lift(Verdict.read(document["verdict"]), document, dt.UTC, "UTC")
        assert "[observer] command" in lift
        assert "`ledger init --billing none`" in lift
        assert "`ledger reconcile`" not in lift

    def test_a_total_budgets_halt_says_it_never_resets(self):
        budget = {"name": "per-session", "per_value": "s1", "period": "total",
                  "period_end": "9999-12-30T00:00:00.000000Z"}  # fmt: skip
        document = {**VERDICT_DOCUMENT, "deciding_cap": "budget:per-session[s1]",
                    "budgets": [budget]}  # fmt: skip
        assert halt_lift(Verdict.read(document["verdict"]), document, dt.UTC, "UTC") == (
            "budget per-session never resets: raise its usd in ledger.toml to spend more"
        )


class TestStopping:
    def test_a_halted_pre_tool_use_stops_without_a_denial_some_releases_would_loop_on(self):
        output = pre_tool_use_output(None, ["w"], "halted")
        assert output == {
            "continue": False,
            "stopReason": "halted\nw",
            "systemMessage": "halted\nw",
        }

    def test_post_tool_use_stops_with_or_without_lines(self):
        assert post_tool_use_output([], "halted") == {
            "continue": False, "stopReason": "halted", "systemMessage": "halted"
        }  # fmt: skip
        assert post_tool_use_output(["a"], "halted")["continue"] is False

    def test_user_prompt_submit_blocks_or_warns(self):
        assert user_prompt_submit_output("halted", []) == {"decision": "block", "reason": "halted"}
        assert user_prompt_submit_output(None, ["near"]) == {"systemMessage": "near"}
        assert user_prompt_submit_output(None, []) == {}

    @pytest.mark.parametrize(
        ("event", "expected"),
        [
            ("PreToolUse", {"hookSpecificOutput": {"hookEventName": "PreToolUse",
             "permissionDecision": "deny", "permissionDecisionReason": "no home"}}),
            ("UserPromptSubmit", {"decision": "block", "reason": "no home"}),
            ("PostToolUse", {"continue": False, "stopReason": "no home",
                             "systemMessage": "no home"}),
            ("Stop", {"continue": False, "stopReason": "no home", "systemMessage": "no home"}),
        ],
    )  # fmt: skip
    def test_fail_closed_uses_each_events_lever(self, event, expected):
        assert fail_closed_output(event, "no home") == expected
