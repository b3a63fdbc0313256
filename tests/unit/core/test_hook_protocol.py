"""Claude Code hook JSON: parsing real samples and the output shapes."""

import json
from pathlib import Path

import pytest

from ledger.core.hook_protocol import (
    HookInputError,
    parse_hook_input,
    post_tool_use_output,
    pre_tool_use_output,
)

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
