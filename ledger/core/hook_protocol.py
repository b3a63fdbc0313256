"""Claude Code hook JSON in and out, as pure translation.

Input (stdin) is one JSON object with ``session_id``, ``transcript_path``,
``cwd``, ``hook_event_name``, ``tool_name``, ``tool_input`` and, for
PostToolUse, ``tool_response`` (other fields, e.g. ``permission_mode`` or
``tool_use_id``, are accepted and ignored). Stop's input has no tool fields
(it adds ``stop_hook_active``, ignored here).

Output follows the Claude Code hooks reference:

- PreToolUse refusal: ``hookSpecificOutput.permissionDecision = "deny"`` with a
  ``permissionDecisionReason`` (shown to Claude), exit 0.
- PreToolUse warning (turn or time budget): no ``permissionDecision`` — the
  normal permission flow goes on — with ``hookSpecificOutput.additionalContext``
  (injected into Claude's context before the tool runs) and a top-level
  ``systemMessage`` (shown to the user).
- PostToolUse: ``hookSpecificOutput.additionalContext`` (the countdown tier and
  the budget lines; plain stdout would not reach the agent).
- Stop: ``{}`` (a Stop hook's ``decision: "block"`` would keep the agent
  going; recording spend never does).
- Nothing to say: ``{}``.
"""

import json
from typing import Any, NamedTuple

from ledger.core.refs import short_ref

PRE_TOOL_USE = "PreToolUse"
POST_TOOL_USE = "PostToolUse"
STOP = "Stop"
TOOL_EVENTS = frozenset({PRE_TOOL_USE, POST_TOOL_USE})
MAX_INPUT_BYTES = 64 << 20
_TEXT_MAX = 256


class HookInputError(ValueError):
    """Hook input that is not a usable Claude Code hook object; the message says why."""


class HookInput(NamedTuple):
    """The fields of a hook's input this product uses (``tool_name`` is empty for Stop)."""

    hook_event_name: str
    tool_name: str
    session_id: str | None
    transcript_path: str | None
    cwd: str | None
    tool_input: dict[str, Any]
    tool_response: Any = None


def _optional_text(document: dict[str, Any], name: str) -> str | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise HookInputError(f"{name} is not a string")
    return value


def parse_hook_input(raw: bytes | str, expected_event: str) -> HookInput:
    """Parse a hook's stdin (a tool hook's, or Stop's: no tool then).

    Raises:
        HookInputError: not UTF-8 JSON, not an object, ``tool_name`` missing
            (of a tool hook) or not a string, ``tool_input`` not an object, or
            ``hook_event_name`` naming another event.
    """
    if len(raw) > MAX_INPUT_BYTES:
        raise HookInputError(f"input larger than {MAX_INPUT_BYTES} bytes")
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise HookInputError(f"not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise HookInputError("not a JSON object")
    event = document.get("hook_event_name", expected_event)
    if event != expected_event:
        raise HookInputError(f"hook_event_name is {event!r}, expected {expected_event!r}")
    tool_name = document.get("tool_name", "")
    if expected_event in TOOL_EVENTS and (not isinstance(tool_name, str) or not tool_name):
        raise HookInputError("tool_name missing or not a string")
    if not isinstance(tool_name, str):
        raise HookInputError("tool_name is not a string")
    tool_input = document.get("tool_input", {})
    if not isinstance(tool_input, dict):
        raise HookInputError("tool_input is not an object")
    return HookInput(
        hook_event_name=expected_event,
        tool_name=tool_name,
        session_id=_optional_text(document, "session_id"),
        transcript_path=_optional_text(document, "transcript_path"),
        cwd=_optional_text(document, "cwd"),
        tool_input=tool_input,
        tool_response=document.get("tool_response"),
    )


def clip(text: str | None, limit: int = _TEXT_MAX) -> str | None:
    """``text`` cut to ``limit`` characters (for payload fields)."""
    return None if text is None else text[:limit]


def pre_tool_use_output(deny_reason: str | None, warnings: list[str]) -> dict[str, Any]:
    """What a PreToolUse hook prints.

    A refusal carries the warnings in its reason; warnings alone never block.
    """
    if deny_reason is not None:
        reason = "\n".join([deny_reason, *warnings])
        return {
            "hookSpecificOutput": {
                "hookEventName": PRE_TOOL_USE,
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    if not warnings:
        return {}
    text = "\n".join(warnings)
    return {
        "systemMessage": text,
        "hookSpecificOutput": {"hookEventName": PRE_TOOL_USE, "additionalContext": text},
    }


def post_tool_use_output(lines: list[str]) -> dict[str, Any]:
    """What a PostToolUse hook prints: the lines as ``additionalContext``."""
    if not lines:
        return {}
    return {
        "hookSpecificOutput": {
            "hookEventName": POST_TOOL_USE,
            "additionalContext": "\n".join(lines),
        }
    }


def _dollars(micros: object) -> str:
    """Micro-USD for people: dollars with cents, to the hundredth of a cent."""
    if not isinstance(micros, int):
        return "$?"
    return f"${micros // 1_000_000:,}.{micros % 1_000_000 // 100:04d}"


def usd_verdict_reason(document: dict[str, Any]) -> str:
    """A USD verdict in one sentence for the agent (and the user) to read."""
    verdict = document.get("verdict")
    ref = short_ref(str(document.get("verdict_ref") or "not recorded"))
    if verdict == "halt-uncertainty":
        return (
            f"ledger: USD budget halt-uncertainty ({document.get('uncertainty_reason')}): "
            f"{document.get('diagnostic')}; tool call refused (fail-closed; verdict {ref})"
        )
    pct = document.get("usage_pct")
    figures = (
        f"{document.get('deciding_cap')} cap {_dollars(document.get('daily_cap_micros'))}, "
        f"used {_dollars(document.get('usd_used_micros'))}, "
        f"reserved {_dollars(document.get('usd_reserved_micros'))}, "
        f"next call ~{_dollars(document.get('estimated_micros'))}"
        f"{'' if pct is None else f' ({pct:.1f}% projected)'}"
    )
    if verdict == "halt-100":
        return (
            f"ledger: USD budget halt-100 for {document.get('utc_day')}: {figures}; "
            f"tool call refused, spend stops until the budget day ends (verdict {ref})"
        )
    return f"ledger: USD budget warn-90: {figures} (verdict {ref})"
