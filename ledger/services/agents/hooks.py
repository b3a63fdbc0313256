"""Claude Code hooks: tool uses counted and gated, spend recorded, new prompts gated.

The hook's scope comes from the caller (the environment, read by the CLI):
a workflow (turns), an agent (tool calls) and an optional ``LEDGER_BUDGET_END``
deadline. PreToolUse first runs the session's USD verdict, which
denies on a halt; then it seals one ``hook.pre_tool_use`` envelope that counts
the turn and the tool call together, inside the chain lock. Only a USD halt or
an exhausted (or unknown, or untrustworthy) tool-call budget denies; turn and
time budgets warn. PostToolUse and Stop record the transcript's new calls
(``ledger.services.agents.claude_spend``); PostToolUse writes nothing else.
When a session stops (a hook stops it, Stop, SessionEnd) its whole transcript
is recorded, the newest call included, and its open verdicts are settled at $0.

A session whose USD verdict halts is stopped (``continue: false``), not only
refused one tool call: text-only turns would otherwise go on spending. Every
hook fails closed: a home it cannot use, or spend it cannot record, refuses
or stops rather than letting the agent run ungated.
"""

import datetime as dt
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from ledger.core.agents import time as agent_time
from ledger.core.agents import tools as agent_tools
from ledger.core.agents import turns as agent_turns
from ledger.core.hook_protocol import (
    POST_TOOL_USE,
    PRE_TOOL_USE,
    SESSION_END,
    STOP,
    USER_PROMPT_SUBMIT,
    HookInput,
    clip,
    fail_closed_output,
    post_tool_use_output,
    pre_tool_use_output,
    stopped,
    user_prompt_submit_output,
)
from ledger.errors import LedgerError
from ledger.services.agents.claude_spend import SpendDeps, SpendReport, record_transcript
from ledger.services.agents.session import AgentDeps, AgentSession, agent_session
from ledger.services.agents.session_gate import (
    SessionVerdict,
    release_session,
    session_halt,
    session_verdict,
)


class HookDeps(AgentDeps, SpendDeps, Protocol):
    """What the hooks need: agent budgets, the USD gate and transcripts."""

    @property
    def home(self) -> Path:
        """The ledger home, as the command line named it."""
        ...

    def home_problem(self) -> str | None:
        """Why the home cannot be used, or ``None``."""
        ...

    def access_problem(self) -> str | None:
        """Why this OS user cannot read and write the home (naming the fix), or ``None``."""
        ...


class HookScope(NamedTuple):
    """What a hook call is about; ``notes`` are problems with the scope itself."""

    workflow: str | None = None
    agent: str | None = None
    budget_end: dt.datetime | None = None
    invalid_agent: str | None = None
    notes: tuple[str, ...] = ()
    # The session's model calls go through this gateway (``hook install`` set
    # it beside ``ANTHROPIC_BASE_URL``): it gates and records each call, so
    # the hooks reserve nothing themselves and only stop a halted session.
    gateway: str | None = None


class HookResult(NamedTuple):
    """The JSON to print, the envelope written (if any) and lines for stderr."""

    output: dict[str, Any]
    entry_hash: str | None = None
    errors: tuple[str, ...] = ()


def _turn_warnings(session: AgentSession, workflow: str | None) -> list[str]:
    if workflow is None:
        return []
    state = session.agents["workflows"].get(workflow)
    if session.problem is not None:
        return [f"ledger: turn budget unknown, the counter cannot be trusted: {session.problem}"]
    if state is None:
        return []
    status = agent_turns.assess(workflow, state)
    if status.verdict in {agent_turns.TurnVerdict.WARNING, agent_turns.TurnVerdict.EXCEEDED}:
        return [status.message]
    return []


def _decide_tool(session: AgentSession, agent: str) -> tuple[agent_tools.ToolOutcome, str | None]:
    state = session.agents["tools"].get(agent)
    if session.problem is not None:
        reason = f"tool-call counter cannot be trusted; refused (fail-closed): {session.problem}"
        return agent_tools.ToolOutcome.REFUSED, reason
    if state is None:
        return agent_tools.ToolOutcome.REFUSED, agent_tools.no_budget_reason(agent)
    outcome = agent_tools.decide_use(state, exempt=False)
    if outcome is agent_tools.ToolOutcome.REFUSED:
        return outcome, agent_tools.exhausted_reason(agent, state)
    return outcome, None


def _usd_gate(
    deps: HookDeps, hook: HookInput, scope: HookScope, refused: str = "tool call refused"
) -> SessionVerdict:
    """The session's USD gate: a verdict, or behind a gateway only whether it halts.

    The gateway gates and records every model call itself; a verdict here would
    reserve budget for a call the gateway reserves for again.
    """
    if scope.gateway is None:
        return session_verdict(deps, hook, scope.agent, refused)
    reason = session_halt(deps, hook, scope.agent, refused)
    return SessionVerdict(deny=reason, halted=reason is not None)


def _wind_up(deps: HookDeps, hook: HookInput, scope: HookScope) -> tuple[str, ...]:
    """A stopping session: record its whole transcript, settle its open verdicts at $0."""
    spent = record_transcript(deps, hook, final=True, agent=scope.agent)
    line = spent.stderr_line()
    return (*(() if line is None else (line,)), *release_session(deps, hook))


def pre_tool_use(deps: HookDeps, hook: HookInput, scope: HookScope) -> HookResult:
    """The session's USD verdict, then count the turn and the tool call.

    Denies on a USD halt (nothing is counted then: the call never runs) or
    when the tool-call budget refuses. Never raises a ``LedgerError``: when
    nothing can be recorded, a scope with an agent is denied (fail-closed) and
    one without is warned.
    """
    warnings = list(scope.notes)
    if scope.invalid_agent is not None:
        return HookResult(pre_tool_use_output(scope.invalid_agent, warnings))
    usd = _usd_gate(deps, hook, scope)
    if usd.halted and usd.deny is not None:
        output = pre_tool_use_output(None, warnings, usd.deny)
        return HookResult(output, usd.entry_hash, (*usd.errors, *_wind_up(deps, hook, scope)))
    if usd.deny is not None:
        return HookResult(pre_tool_use_output(usd.deny, warnings), usd.entry_hash, usd.errors)
    warnings.extend(usd.warnings)
    try:
        result = _pre_tool_use(deps, hook, scope, warnings)
    except LedgerError as exc:
        problem = f"could not record this tool call: {exc}"
        if scope.agent is not None:
            deny = f"ledger {problem}; refused (fail-closed)"
            result = HookResult(pre_tool_use_output(deny, warnings), errors=(problem,))
        else:
            warning = f"ledger {problem}"
            output = pre_tool_use_output(None, [*warnings, warning])
            result = HookResult(output, errors=(problem,))
    return result._replace(errors=(*usd.errors, *result.errors))


def _pre_tool_use(
    deps: AgentDeps, hook: HookInput, scope: HookScope, warnings: list[str]
) -> HookResult:
    counting = scope.workflow is not None or scope.agent is not None
    if not counting and scope.budget_end is not None:
        countdown = agent_time.Countdown(scope.budget_end, "env", deps.clock.now())
        if countdown.tier is agent_time.Tier.EXPIRED:
            warnings.append(countdown.message)
        return HookResult(pre_tool_use_output(None, warnings))
    entry_hash = None
    deny = None
    with agent_session(deps, write=counting) as session:
        if counting:
            outcome, deny = (
                (None, None) if scope.agent is None else _decide_tool(session, scope.agent)
            )
            tool_state = session.agents["tools"].get(scope.agent) if scope.agent else None
            payload = {
                "session_id": clip(hook.session_id),
                "tool_name": clip(hook.tool_name),
                "workflow": scope.workflow,
                # A denied call never runs: it is not a turn.
                "turn_counted": deny is None and scope.workflow in session.agents["workflows"],
                "agent": scope.agent,
                "tool_call": None if outcome is None else outcome.value,
                "budget": tool_state.get("total") if tool_state else None,
                "budget_used": tool_state.get("used") if tool_state else None,
                "decision": "none" if scope.agent is None else ("deny" if deny else "allow"),
                "reason": clip(deny, 1024),
            }
            entry_hash = session.append("hook.pre_tool_use", payload).entry_hash
        warnings.extend(_turn_warnings(session, scope.workflow))
        current = agent_time.countdown_from(session.agents, scope.budget_end, session.now)
        if current is not None and current.tier is agent_time.Tier.EXPIRED:
            warnings.append(current.message)
    return HookResult(pre_tool_use_output(deny, warnings), entry_hash)


def _post_lines(
    session: AgentSession | None, hook: HookInput, scope: HookScope, now: dt.datetime
) -> list[str]:
    agents: dict[str, Any] = session.agents if session is not None else {}
    lines = list(scope.notes)
    if scope.invalid_agent is not None:
        lines.append(scope.invalid_agent)
    countdown = agent_time.countdown_from(agents, scope.budget_end, now)
    if countdown is not None:
        lines.append(countdown.message)
    if scope.agent is not None and session is not None:
        state = agents["tools"].get(scope.agent)
        if state is None:
            lines.append(f"no tool-call budget for agent {scope.agent}")
        else:
            line = agent_tools.budget_line(int(state["used"]), state.get("total"))
            lines.append(f"{line}, Action: {hook.tool_name}")
    if scope.workflow is not None and session is not None:
        state = agents["workflows"].get(scope.workflow)
        if state is not None:
            status = agent_turns.assess(scope.workflow, state)
            if status.verdict is agent_turns.TurnVerdict.OK:
                lines.append(agent_turns.status_line(status))
            else:
                lines.append(status.message)
    if session is not None and session.problem is not None:
        lines.append(f"ledger: budget counters cannot be trusted: {session.problem}")
    return lines


def _unrecorded_reason(deps: HookDeps, spent: SpendReport) -> str | None:
    if not spent.unrecorded:
        return None
    return (
        f"ledger: this session's spend could not be recorded in the ledger home "
        f"{deps.home.absolute()} ({spent.problem}); session stopped (fail-closed)"
    )


def post_tool_use(deps: HookDeps, hook: HookInput, scope: HookScope) -> HookResult:
    """Record the transcript's new calls; the countdown tier and budget lines as context.

    Stops the session when its spend could not be recorded or the USD gate
    halts with nothing more spent.
    """
    spent = record_transcript(deps, hook, final=False, agent=scope.agent)
    errors = () if (line := spent.stderr_line()) is None else (line,)
    stop_reason = _unrecorded_reason(deps, spent) or session_halt(deps, hook, scope.agent)
    if stop_reason is not None:
        errors = (*errors, *_wind_up(deps, hook, scope))
    result = _post_tool_use(deps, hook, scope, stop_reason)
    return result._replace(errors=(*errors, *result.errors))


def _post_tool_use(
    deps: AgentDeps, hook: HookInput, scope: HookScope, stop_reason: str | None
) -> HookResult:
    try:
        if scope.workflow is None and scope.agent is None and scope.budget_end is not None:
            lines = _post_lines(None, hook, scope, deps.clock.now())
            return HookResult(post_tool_use_output(lines, stop_reason))
        with agent_session(deps, write=False) as session:
            lines = _post_lines(session, hook, scope, session.now)
        return HookResult(post_tool_use_output(lines, stop_reason))
    except LedgerError as exc:
        problem = f"could not read the budgets: {exc}"
        lines = [*scope.notes, f"ledger {problem}"]
        return HookResult(post_tool_use_output(lines, stop_reason), errors=(problem,))


def stop(deps: HookDeps, hook: HookInput, scope: HookScope) -> HookResult:
    """Record the transcript's calls not recorded yet, the newest one too.

    Prints ``{}``, or ``continue: false`` with the reason when the spend could
    not be recorded or the session's USD gate halts (the user sees why the
    next prompt will be blocked).
    """
    spent = record_transcript(deps, hook, final=True, agent=scope.agent)
    line = spent.stderr_line()
    stop_reason = _unrecorded_reason(deps, spent) or session_halt(deps, hook, scope.agent)
    errors = (*(() if line is None else (line,)), *release_session(deps, hook))
    return HookResult(stopped({}, stop_reason), errors=errors)


def session_end(deps: HookDeps, hook: HookInput, scope: HookScope) -> HookResult:
    """The session ended: record its whole transcript, settle its open verdicts at $0."""
    return HookResult({}, errors=_wind_up(deps, hook, scope))


def user_prompt_submit(deps: HookDeps, hook: HookInput, scope: HookScope) -> HookResult:
    """The session's USD verdict before a new prompt reaches the model.

    Blocks the prompt on a halt, warns on ``warn-90``; the tool-call and turn
    budgets are not consulted (a prompt is neither).
    """
    usd = _usd_gate(deps, hook, scope, refused="prompt blocked")
    output = user_prompt_submit_output(usd.deny, [*scope.notes, *usd.warnings])
    return HookResult(output, usd.entry_hash, usd.errors)


def answer(deps: HookDeps, hook: HookInput, scope: HookScope) -> HookResult:
    """The answer to one hook call, fail-closed when the home cannot be used.

    A home that does not exist, cannot be read or was never initialised gets
    a refusal (or a stop) naming it, and nothing is created in it; one this OS
    user may not read and write names the entry, its owner and the fixes.
    """
    event = hook.hook_event_name
    # Another user's home (or one without permissions for this one) is named as
    # that, with its fixes, before a half-done verdict halts with reasons that
    # would not help.
    problem = deps.access_problem() or deps.home_problem()
    if problem is not None:
        reason = f"ledger: {problem}; {REFUSED[event]} (fail-closed)"
        return HookResult(fail_closed_output(event, reason), errors=(problem,))
    if event == PRE_TOOL_USE:
        return pre_tool_use(deps, hook, scope)
    if event == USER_PROMPT_SUBMIT:
        return user_prompt_submit(deps, hook, scope)
    if event == STOP:
        return stop(deps, hook, scope)
    if event == SESSION_END:
        return session_end(deps, hook, scope)
    return post_tool_use(deps, hook, scope)


REFUSED = {
    PRE_TOOL_USE: "tool call refused",
    USER_PROMPT_SUBMIT: "prompt blocked",
    POST_TOOL_USE: "session stopped",
    STOP: "session stopped",
    SESSION_END: "session stopped",
}
