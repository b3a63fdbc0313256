"""Claude Code hook JSON in and out, as pure translation.

Input (stdin) is one JSON object with ``session_id``, ``transcript_path``,
``cwd``, ``hook_event_name``, ``tool_name``, ``tool_input`` and, for
PostToolUse, ``tool_response`` (other fields, e.g. ``permission_mode`` or
``tool_use_id``, are accepted and ignored). Stop's and UserPromptSubmit's
inputs have no tool fields (they add ``stop_hook_active`` and ``prompt``,
ignored here).

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
- UserPromptSubmit refusal: ``decision: "block"`` with a ``reason`` (the prompt
  is never sent to the model; the user sees the reason).
- A halted session: ``continue: false`` with a ``stopReason`` stops Claude
  Code after this hook; the only lever PostToolUse and Stop have. PreToolUse
  sends it *without* ``permissionDecision: "deny"``: some Claude Code releases
  (2.1.197 among them) ignore ``continue: false`` next to a denial and go on
  calling the model after every refused tool, while every release tested
  stops on ``continue: false`` alone. The reason also goes out as a
  ``systemMessage``, the part ``claude -p`` shows (in its stream-json output).
- SessionEnd: ``{}`` (it cannot change anything; it records).
- Nothing to say: ``{}``.
"""

import datetime as dt
import json
import re
from typing import Any, NamedTuple

from ledger.core.refs import short_ref
from ledger.core.timefmt import parse_ts
from ledger.core.verdict_kind import Verdict

PRE_TOOL_USE = "PreToolUse"
POST_TOOL_USE = "PostToolUse"
STOP = "Stop"
SESSION_END = "SessionEnd"
USER_PROMPT_SUBMIT = "UserPromptSubmit"
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


def stopped(output: dict[str, Any], stop_reason: str | None) -> dict[str, Any]:
    """``output`` that also stops the session (``continue: false``) when ``stop_reason`` is set.

    The reason is also a ``systemMessage``: ``claude -p`` shows that, not ``stopReason``.
    """
    if stop_reason is None:
        return output
    return {"continue": False, "stopReason": stop_reason, "systemMessage": stop_reason, **output}


def pre_tool_use_output(
    deny_reason: str | None, warnings: list[str], stop_reason: str | None = None
) -> dict[str, Any]:
    """What a PreToolUse hook prints.

    A refusal carries the warnings in its reason; warnings alone never block.
    ``stop_reason`` (a halted session) stops Claude Code instead of denying
    the one tool call: a denial next to ``continue: false`` keeps some
    releases calling the model.
    """
    if stop_reason is not None:
        return stopped({}, "\n".join([stop_reason, *warnings]))
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


def post_tool_use_output(lines: list[str], stop_reason: str | None = None) -> dict[str, Any]:
    """What a PostToolUse hook prints: the lines as ``additionalContext``.

    ``stop_reason`` (a halted session, or spend that could not be recorded)
    stops Claude Code.
    """
    if not lines:
        return stopped({}, stop_reason)
    return stopped(
        {
            "hookSpecificOutput": {
                "hookEventName": POST_TOOL_USE,
                "additionalContext": "\n".join(lines),
            }
        },
        stop_reason,
    )


def user_prompt_submit_output(block_reason: str | None, warnings: list[str]) -> dict[str, Any]:
    """What a UserPromptSubmit hook prints: a block with its reason, or the warnings."""
    if block_reason is not None:
        return {"decision": "block", "reason": "\n".join([block_reason, *warnings])}
    return {"systemMessage": "\n".join(warnings)} if warnings else {}


def _dollars(micros: object) -> str:
    """Micro-USD for people: dollars with cents, to the hundredth of a cent."""
    if not isinstance(micros, int):
        return "$?"
    return f"${micros // 1_000_000:,}.{micros % 1_000_000 // 100:04d}"


# What an operator runs to lift each kind of uncertainty halt.
_LIFTED_BY = {
    "counter_drift": (
        "a later `ledger reconcile` within the drift threshold, or an operator's "
        "`ledger reconcile --force-reason TEXT`"
    ),
    "billing_stale": "a fresh billing reading (`ledger reconcile`, or the daemon's poll)",
    "provider_lag": "a billing reading that no longer lags (`ledger reconcile`)",
    "clock_drift": "a corrected system clock",
}
_BILLING_REASONS = frozenset({"billing_stale", "provider_lag"})
_REMEDY_RE = re.compile(r"run (`ledger [^`]+`)")


def remedy_in(diagnostic: str) -> str | None:
    """The command a diagnostic names as its way out (its last ``run `ledger …```), if any.

    The diagnostic is written where the damage is found and knows the remedy
    best (a tampered chain: ``recover``); a table keyed by words is the fallback.
    """
    found = _REMEDY_RE.findall(diagnostic)
    return str(found[-1]) if found else None


_COUNTER_LIFTS = (
    ("price", "pricing the model in ledger.toml, then `ledger rebuild-state`"),
    ("torn", "`ledger recover`"),
    ("broken", "`ledger recover`"),
    ("derived state", "`ledger rebuild-state`"),
)


def _next_budget_day(document: dict[str, Any], zone: dt.tzinfo, zone_name: str) -> str:
    """When the budget day after the verdict's begins, in the budget day's zone."""
    day = document.get("budget_day") or document.get("utc_day")
    try:
        following = dt.date.fromisoformat(str(day)) + dt.timedelta(days=1)
    except ValueError:
        return "the next budget day begins"
    start = dt.datetime.combine(following, dt.time(), tzinfo=zone)
    return f"the next budget day begins ({start:%Y-%m-%d %H:%M} {zone_name})"


def _deciding_budget(document: dict[str, Any]) -> dict[str, Any] | None:
    """The ``budgets`` entry of the budget that decided the verdict, if a budget did."""
    deciding = str(document.get("deciding_cap") or "")
    if not deciding.startswith("budget:"):
        return None
    for entry in document.get("budgets") or ():
        if not isinstance(entry, dict):
            continue
        value = entry.get("per_value")
        key = f"budget:{entry.get('name')}" + ("" if value is None else f"[{value}]")
        if key == deciding:
            return entry
    return None


def _local(text: object, zone: dt.tzinfo, zone_name: str) -> str | None:
    try:
        moment = parse_ts(text)
    except ValueError:
        return None
    return f"{moment.astimezone(zone):%Y-%m-%d %H:%M} {zone_name}"


def _budget_lift(entry: dict[str, Any], zone: dt.tzinfo, zone_name: str) -> str:
    """When a budget's halt lifts: its period's end, or spend leaving its rolling window."""
    name, period = entry.get("name"), str(entry.get("period"))
    if period.startswith("rolling:"):
        # ``lifts_at``: when enough spend has left the window (known to a halt found
        # with nothing more asked for, which reads the window's spend).
        at = _local(entry.get("lifts_at"), zone, zone_name)
        when = f" (at {at})" if at is not None else ""
        return f"spend resumes when enough spend leaves budget {name}'s {period} window{when}"
    if period == "total":
        return f"budget {name} never resets: raise its usd in ledger.toml to spend more"
    end = _local(entry.get("period_end"), zone, zone_name)
    return f"spend resumes when budget {name}'s {period} ends{f' ({end})' if end else ''}"


def halt_lift(verdict: Verdict, document: dict[str, Any], zone: dt.tzinfo, zone_name: str) -> str:
    """What lifts a halt verdict, in words: when the day or budget period turns, or which command.

    ``verdict`` is the document's verdict, read once by the caller. A halt
    decided by a ``[[budgets]]`` budget lifts when its period ends, or for a
    rolling window when enough spend leaves it.
    """
    next_day = _next_budget_day(document, zone, zone_name)
    if verdict is Verdict.HALT_100:
        budget = _deciding_budget(document)
        if budget is not None:
            return _budget_lift(budget, zone, zone_name)
        return f"spend resumes when {next_day}"
    reason = str(document.get("uncertainty_reason"))
    lift = _LIFTED_BY.get(reason)
    if lift is None:
        lift = remedy_in(str(document.get("diagnostic") or ""))
    if lift is None:
        diagnostic = str(document.get("diagnostic") or "").lower()
        found = [text for word, text in _COUNTER_LIFTS if word in diagnostic]
        lift = (
            found[0]
            if found
            else "`ledger recover` (a damaged chain), `ledger rebuild-state` (derived "
            "state, or after pricing a model) or `ledger reconcile --force-reason TEXT`"
        )
    if reason == "billing_stale" and "no billing observer" in str(document.get("diagnostic")):
        lift = (
            "a billing observer is configured ([observer] command in ledger.toml) or "
            "billing.stale_halt_pct is set to 100 (`ledger init --billing none`)"
        )
    if reason in _BILLING_REASONS:
        # A fresh bill lifts the uncertainty; spend over a cap still waits for the next day.
        return f"this halt stays until {lift}, and spend over a cap until {next_day}"
    return f"this halt stays until {lift}"


def usd_verdict_reason(
    verdict: Verdict, document: dict[str, Any], refused: str = "tool call refused"
) -> str:
    """A USD verdict in one sentence for the agent (and the user) to read.

    ``verdict`` is the document's verdict, read once by the caller. ``refused``
    says what a halt refuses (a tool call, a prompt); what lifts the halt is
    added by the caller, who knows the budget day's zone.
    """
    ref = short_ref(str(document.get("verdict_ref") or "not recorded"))
    # A halt found without asking for a verdict (PostToolUse, Stop) has no ref.
    sealed = "verdict_ref" in document
    if verdict is Verdict.HALT_UNCERTAINTY:
        return (
            f"ledger: USD budget halt-uncertainty ({document.get('uncertainty_reason')}): "
            f"{document.get('diagnostic')}; {refused} (fail-closed"
            f"{f'; verdict {ref}' if sealed else ''})"
        )
    pct = document.get("usage_pct")
    estimate = document.get("estimated_micros")
    figures = (
        f"{document.get('deciding_cap')} cap {_dollars(document.get('daily_cap_micros'))}, "
        f"used {_dollars(document.get('usd_used_micros'))}, "
        f"reserved {_dollars(document.get('usd_reserved_micros'))}"
        # A halt found with nothing more asked for (PostToolUse, Stop) has no next call.
        f"{f', next call ~{_dollars(estimate)}' if estimate else ''}"
        f"{'' if pct is None else f' ({pct:.1f}% projected)'}"
    )
    if verdict is Verdict.HALT_100:
        day = document.get("budget_day") or document.get("utc_day")
        return (
            f"ledger: USD budget halt-100 for {day}: {figures}; "
            f"{refused}{f' (verdict {ref})' if sealed else ''}"
        )
    return f"ledger: USD budget warn-90: {figures} (verdict {ref})"


def fail_closed_output(event: str, reason: str) -> dict[str, Any]:
    """The answer of a hook that cannot do its job (no usable home, nothing recordable).

    PreToolUse denies the tool call, UserPromptSubmit blocks the prompt;
    PostToolUse and Stop, which cannot refuse anything, stop the session.
    """
    if event == PRE_TOOL_USE:
        return pre_tool_use_output(reason, [])
    if event == USER_PROMPT_SUBMIT:
        return user_prompt_submit_output(reason, [])
    return stopped({}, reason)
