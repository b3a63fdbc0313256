"""Agent budgets: convoy tokens, workflow turns, tool calls and countdowns (SPEC §6).

Every check and use is sealed in the chain inside the chain lock, so check and
reserve (or check and count) are one atomic step across processes. Hard
budgets (tokens, tool calls) fail closed: an untrusted counter, an unknown
budget or an unrecordable check refuses. Advisory budgets (turns, time) follow
their seeds and fail open, saying that no budget applies.
"""

import datetime as dt
from fractions import Fraction
from typing import Any, NamedTuple

from ledger.core.agents import time as agent_time
from ledger.core.agents import tokens as agent_tokens
from ledger.core.agents import tools as agent_tools
from ledger.core.agents import turns as agent_turns
from ledger.core.agents.ids import UnknownBudgetError, display_number, pct_value
from ledger.core.agents.time import countdown_from
from ledger.core.agents.tokens import TokenReason
from ledger.core.timefmt import format_ts
from ledger.errors import (
    ChainIOError,
    ClockRangeError,
    InputDataError,
    LockTimeoutError,
    UsageError,
)
from ledger.services.agent_session import AgentDeps, AgentSession, agent_session
from ledger.services.idempotency import find_duplicate, remember_keys_untrusted

# --------------------------------------------------------------------------- tokens


def tokens_create(
    deps: AgentDeps, convoy: str, convoy_max: int, agent_max: int, warn_pct: str
) -> dict[str, Any]:
    """Create a convoy budget.

    Raises:
        UsageError: the convoy already has a budget (delete it first).
    """
    with agent_session(deps) as session:
        if convoy in session.agents["convoys"]:
            raise UsageError(
                f"convoy {convoy} already has a token budget; `ledger tokens delete {convoy}` first"
            )
        payload = {
            "convoy": convoy,
            "convoy_max_tokens": convoy_max,
            "agent_max_tokens": agent_max,
            "warn_pct": warn_pct,
        }
        sealed = session.append("tokens.budget_created", payload)
    return {
        "created": True,
        "convoy": convoy,
        "convoy_max_tokens": convoy_max,
        "agent_max_tokens": agent_max,
        "warn_pct": display_number(pct_value(warn_pct)),
        "entry_hash": sealed.entry_hash,
    }


def tokens_delete(deps: AgentDeps, convoy: str) -> dict[str, Any]:
    """Delete a convoy budget (a no-op for an unknown convoy, as the seed)."""
    with agent_session(deps) as session:
        if convoy not in session.agents["convoys"]:
            return {"deleted": False, "convoy": convoy, "entry_hash": None}
        sealed = session.append("tokens.budget_deleted", {"convoy": convoy})
    return {"deleted": True, "convoy": convoy, "entry_hash": sealed.entry_hash}


def tokens_list(deps: AgentDeps) -> dict[str, Any]:
    """Every convoy budget with its totals (read-only)."""
    with agent_session(deps, write=False) as session:
        convoys = session.agents["convoys"]
        rows = []
        for name in sorted(convoys):
            report = agent_tokens.convoy_report(name, convoys[name], session.now_ts)
            rows.append({key: report[key] for key in _LIST_FIELDS})
        return {"convoys": rows, "diagnostic": session.problem}


_LIST_FIELDS = (
    "convoy", "max_allowed", "agent_max_tokens", "warn_pct", "total_consumed",
    "reserved_tokens", "percent_used", "warning_active", "budget_exhausted",
)  # fmt: skip


def tokens_report(deps: AgentDeps, convoy: str) -> dict[str, Any]:
    """Seed 003's budget report for one convoy (read-only).

    Raises:
        UnknownBudgetError: no such convoy.
    """
    with agent_session(deps, write=False) as session:
        state = session.agents["convoys"].get(convoy)
        if state is None:
            raise UnknownBudgetError(f"no token budget for convoy {convoy}")
        report = agent_tokens.convoy_report(convoy, state, session.now_ts)
        report["diagnostic"] = session.problem
        return report


class TokenCheck(NamedTuple):
    """The answer to ``tokens check`` and how it was recorded."""

    allowed: bool
    reason: TokenReason
    check_ref: str | None
    remaining_tokens: int | None
    usage_pct: Fraction | None
    agent_usage_pct: Fraction | None
    figures: agent_tokens.TokenFigures | None
    reservation: dict[str, Any] | None
    diagnostic: str | None
    recording_error: str | None = None

    def as_json(self, convoy: str, agent: str, projected: int) -> dict[str, Any]:
        """What ``tokens check`` prints."""
        fig = self.figures
        return {
            "check_ref": self.check_ref,
            "allowed": self.allowed,
            "reason": self.reason.value,
            "remaining_tokens": self.remaining_tokens,
            "usage_pct": _pct_out(self.usage_pct),
            "agent_usage_pct": _pct_out(self.agent_usage_pct),
            "convoy": convoy,
            "agent": agent,
            "projected_tokens": projected,
            "convoy_max_tokens": fig.convoy_max if fig else None,
            "agent_max_tokens": fig.agent_max if fig else None,
            "convoy_used_tokens": fig.convoy_used if fig else None,
            "convoy_reserved_tokens": fig.convoy_reserved if fig else None,
            "agent_used_tokens": fig.agent_used if fig else None,
            "agent_reserved_tokens": fig.agent_reserved if fig else None,
            "reservation_expires_at": self.reservation["expires_at"] if self.reservation else None,
            "diagnostic": self.diagnostic,
        }


def _pct_out(value: Fraction | None) -> float | None:
    return None if value is None else round(float(value), 4)


def tokens_check(deps: AgentDeps, convoy: str, agent: str, projected: int) -> TokenCheck:
    """Check ``projected`` tokens for ``agent`` and reserve them when admitted.

    Never raises for a damaged chain, a busy lock, an unusable key or a clock
    or deadline outside what the chain can hold: the answer is then a refusal
    (``counter_inconsistent``) that says why.
    """
    try:
        with agent_session(deps) as session:
            return _tokens_check_locked(session, deps, convoy, agent, projected)
    except (LockTimeoutError, ChainIOError, InputDataError, ClockRangeError, OverflowError) as exc:
        return TokenCheck(
            False, TokenReason.COUNTER_INCONSISTENT, None, None, None, None, None, None,
            f"check not recorded: {exc}", str(exc),
        )  # fmt: skip


def _tokens_check_locked(
    session: AgentSession, deps: AgentDeps, convoy: str, agent: str, projected: int
) -> TokenCheck:
    state = session.agents["convoys"].get(convoy)
    fig = None
    reservation = None
    if session.problem is not None:
        result = TokenCheck(
            False, TokenReason.COUNTER_INCONSISTENT, None, None, None, None, None, None,
            session.problem,
        )  # fmt: skip
    elif state is None:
        result = TokenCheck(
            False, TokenReason.UNKNOWN_CONVOY, None, None, None, None, None, None,
            f"no token budget for convoy {convoy}; refused (fail-closed). "
            f"Create one with `ledger tokens create {convoy}`",
        )  # fmt: skip
    else:
        fig = agent_tokens.figures(state, agent, session.now_ts)
        decision = agent_tokens.decide_tokens(fig, projected)
        if decision.allowed and projected > 0:
            expires = session.now + dt.timedelta(seconds=deps.config.reservation_ttl_seconds)
            reservation = {"tokens": projected, "expires_at": format_ts(expires)}
        result = TokenCheck(
            decision.allowed, decision.reason, None, decision.remaining_tokens,
            decision.convoy_pct, decision.agent_pct, fig, reservation, None,
        )  # fmt: skip
    payload = {
        "convoy": convoy,
        "agent": agent,
        "projected_tokens": projected,
        "allowed": result.allowed,
        "reason": result.reason.value,
        "remaining_tokens": result.remaining_tokens,
        "usage_pct": _pct_payload(result.usage_pct),
        "agent_usage_pct": _pct_payload(result.agent_usage_pct),
        "convoy_max_tokens": fig.convoy_max if fig else None,
        "agent_max_tokens": fig.agent_max if fig else None,
        "convoy_used_tokens": fig.convoy_used if fig else None,
        "convoy_reserved_tokens": fig.convoy_reserved if fig else None,
        "agent_used_tokens": fig.agent_used if fig else None,
        "agent_reserved_tokens": fig.agent_reserved if fig else None,
        "diagnostic": _clip(result.diagnostic),
        "local_time": session.now_ts,
        "reservation": reservation,
    }
    sealed = session.append("tokens.check", payload)
    return TokenCheck(
        result.allowed, result.reason, sealed.entry_hash, result.remaining_tokens,
        result.usage_pct, result.agent_usage_pct, fig, reservation, result.diagnostic,
    )  # fmt: skip


def _pct_payload(value: Fraction | None) -> str | None:
    return None if value is None else agent_tokens.pct_text(value)


def _clip(text: str | None, limit: int = 1024) -> str | None:
    return None if text is None else text[:limit]


def tokens_record(
    deps: AgentDeps, convoy: str, agent: str, tokens_in: int, tokens_out: int,
    check_ref: str | None, idempotency_key: str | None = None,
) -> tuple[dict[str, Any], str | None]:  # fmt: skip
    """Record actual use and settle its reservation. Use is never refused.

    With ``check_ref``, that reservation is settled; without, the agent's oldest
    open reservation in the convoy (one check, one record). An unknown,
    expired or foreign ``check_ref``, or an unknown convoy, is recorded anyway
    with a warning (the second element).
    """
    with agent_session(deps) as session:
        if idempotency_key is not None:
            first = find_duplicate(session.counter, deps, idempotency_key, "tokens.record")
            if first is not None:
                return _token_record_result(first["entry_hash"], first["payload"], None, True), None
        state = session.agents["convoys"].get(convoy)
        warning = None
        settled = None
        if state is None:
            warning = f"no token budget for convoy {convoy}; use recorded anyway"
        else:
            live = {
                ref: res
                for ref, res in state["reservations"].items()
                if res["expires_at"] > session.now_ts and res["agent"] == agent
            }
            if check_ref is not None:
                if check_ref in live:
                    settled = check_ref
                else:
                    warning = (
                        f"check_ref {check_ref[:16]}… is unknown, expired, already settled "
                        f"or not {agent}'s in {convoy}; recorded anyway"
                    )
            elif live:
                settled = min(live, key=lambda ref: (live[ref]["ts"], ref))
        payload = {
            "convoy": convoy,
            "agent": agent,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "check_ref": check_ref,
            "settled_ref": settled,
            "known_convoy": state is not None,
            "idempotency_key": idempotency_key,
        }
        sealed = session.append("tokens.record", payload)
        remember_keys_untrusted(session.counter, deps.states)
        after = session.agents["convoys"].get(convoy)
        used = agent_tokens.agent_used(after, agent) if after is not None else None
    return _token_record_result(sealed.entry_hash, payload, used, False), warning


def _token_record_result(
    entry_hash: str, payload: dict[str, Any], used: int | None, duplicate: bool
) -> dict[str, Any]:
    tokens_in, tokens_out = int(payload["input_tokens"]), int(payload["output_tokens"])
    settled = payload.get("settled_ref")
    return {
        "recorded": True,
        "entry_hash": entry_hash,
        "convoy": payload["convoy"],
        "agent": payload["agent"],
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
        "check_ref": payload.get("check_ref"),
        "settled": settled is not None,
        "settled_ref": settled,
        "agent_used_tokens": used,
        "idempotency_key": payload.get("idempotency_key"),
        "duplicate": duplicate,
    }


# --------------------------------------------------------------------------- turns


def turns_create(deps: AgentDeps, workflow: str, total: int, phase: int) -> dict[str, Any]:
    """Create (or replace: a new budget cycle) a workflow's turn budget."""
    with agent_session(deps) as session:
        replaced = workflow in session.agents["workflows"]
        payload = {
            "workflow": workflow,
            "total": total,
            "phase": phase,
            "phase_name": agent_turns.INITIAL_PHASE,
            "replaced": replaced,
        }
        sealed = session.append("turns.budget_created", payload)
    return {**payload, "created": True, "entry_hash": sealed.entry_hash}


def turns_phase(deps: AgentDeps, workflow: str, name: str, phase: int | None) -> dict[str, Any]:
    """Start a new phase: its count starts at 0 (optionally with a new phase limit).

    Raises:
        UnknownBudgetError: no such workflow.
    """
    with agent_session(deps) as session:
        state = session.agents["workflows"].get(workflow)
        if state is None:
            raise UnknownBudgetError(f"no turn budget for workflow {workflow}")
        payload = {
            "workflow": workflow,
            "phase_name": name,
            "phase": phase,
            "previous_phase_name": state.get("phase_name"),
            "previous_phase_turns": state.get("used_phase"),
        }
        sealed = session.append("turns.phase_started", payload)
        status = agent_turns.assess(workflow, session.agents["workflows"][workflow])
    return {**status.as_json(), "entry_hash": sealed.entry_hash}


def _turn_view(session: AgentSession, workflow: str) -> dict[str, Any]:
    state = session.agents["workflows"].get(workflow)
    view = (
        agent_turns.no_budget(workflow)
        if state is None
        else agent_turns.assess(workflow, state).as_json()
    )
    view["diagnostic"] = session.problem
    return view


def turns_record(deps: AgentDeps, workflow: str, kind: str) -> dict[str, Any]:
    """Count one turn and give the advice that follows."""
    with agent_session(deps) as session:
        applies = workflow in session.agents["workflows"]
        payload = {"workflow": workflow, "type": kind, "budget_applies": applies}
        sealed = session.append("turns.turn", payload)
        view = _turn_view(session, workflow)
    return {**view, "type": kind, "entry_hash": sealed.entry_hash}


def turns_check(deps: AgentDeps, workflow: str) -> dict[str, Any]:
    """Seed 000's advice for a workflow; sealed as ``turns.check``."""
    with agent_session(deps) as session:
        view = _turn_view(session, workflow)
        payload = {
            "workflow": workflow,
            "verdict": view["verdict"],
            "effective_total": view.get("effective_total"),
            "total": view.get("total"),
            "total_pct": view.get("total_pct"),
            "effective_phase": view.get("effective_phase"),
            "phase": view.get("phase"),
            "phase_pct": view.get("phase_pct"),
            "diagnostic": _clip(session.problem),
        }
        sealed = session.append("turns.check", payload)
    return {"check_ref": sealed.entry_hash, **view}


# --------------------------------------------------------------------------- tools


def tools_create(
    deps: AgentDeps, agent: str, role: str, files: int, prior_failures: bool,
    framework_confidence: str | None,
) -> dict[str, Any]:  # fmt: skip
    """Assign an agent's tool-call budget by role (replacing any earlier one)."""
    confidence = Fraction(framework_confidence) if framework_confidence is not None else Fraction(0)
    total = agent_tools.role_budget(role, files, prior_failures, confidence)
    builder = role == "builder"
    with agent_session(deps) as session:
        replaced = agent in session.agents["tools"]
        payload = {
            "agent": agent,
            "role": role,
            "budget": total,
            "files": files if builder else None,
            "prior_failures": prior_failures if builder else None,
            "framework_confidence": framework_confidence if builder else None,
            "replaced": replaced,
        }
        sealed = session.append("tools.budget_created", payload)
    view = agent_tools.ToolView(agent, role, total, 0, 0, 0).as_json()
    return {**view, "created": True, "replaced": replaced, "entry_hash": sealed.entry_hash}


class ToolAnswer(NamedTuple):
    """The answer to ``tools use`` / ``tools check``."""

    allowed: bool
    view: dict[str, Any]


def _tool_refusal(session: AgentSession, agent: str) -> str | None:
    if session.problem is not None:
        return f"tool-call counter cannot be trusted; refused (fail-closed): {session.problem}"
    if agent not in session.agents["tools"]:
        return agent_tools.no_budget_reason(agent)
    return None


def _tool_view(session: AgentSession, agent: str) -> dict[str, Any]:
    state = session.agents["tools"].get(agent)
    if state is None:
        return {"agent": agent, "role": None, "budget": None, "budget_used": None,
                "budget_remaining": None, "exhausted": None}  # fmt: skip
    return agent_tools.ToolView.of(agent, state).as_json()


def tools_use(deps: AgentDeps, agent: str, exempt: bool) -> ToolAnswer:
    """Use one tool call from the budget: counted, exempt, or refused when exhausted."""
    with agent_session(deps) as session:
        refusal = None if exempt else _tool_refusal(session, agent)
        state = session.agents["tools"].get(agent)
        if refusal is not None:
            outcome = agent_tools.ToolOutcome.REFUSED
        elif state is None:
            outcome = agent_tools.ToolOutcome.EXEMPT
        else:
            outcome = agent_tools.decide_use(state, exempt)
            if outcome is agent_tools.ToolOutcome.REFUSED:
                refusal = agent_tools.exhausted_reason(agent, state)
        payload = {
            "agent": agent,
            "exempt": exempt,
            "outcome": outcome.value,
            "budget": state.get("total") if state else None,
            "budget_used": state.get("used") if state else None,
            "reason": _clip(refusal),
        }
        sealed = session.append("tools.use", payload)
        view = _tool_view(session, agent)
    allowed = outcome is not agent_tools.ToolOutcome.REFUSED
    view.update(
        {"allowed": allowed, "outcome": outcome.value, "exempt": exempt, "reason": refusal,
         "entry_hash": sealed.entry_hash}
    )  # fmt: skip
    if refusal is not None and state is None:
        view["message"] = refusal
    return ToolAnswer(allowed, view)


def tools_check(deps: AgentDeps, agent: str) -> ToolAnswer:
    """Whether the agent's next counted call fits; sealed as ``tools.check``."""
    with agent_session(deps) as session:
        refusal = _tool_refusal(session, agent)
        state = session.agents["tools"].get(agent)
        if refusal is None and state is not None and agent_tools.exhausted(state):
            refusal = agent_tools.exhausted_reason(agent, state)
        allowed = refusal is None
        payload = {
            "agent": agent,
            "allowed": allowed,
            "budget": state.get("total") if state else None,
            "budget_used": state.get("used") if state else None,
            "reason": _clip(refusal),
        }
        sealed = session.append("tools.check", payload)
        view = _tool_view(session, agent)
    view.update({"allowed": allowed, "reason": refusal, "check_ref": sealed.entry_hash})
    if state is None:
        view["message"] = refusal
    return ToolAnswer(allowed, view)


# --------------------------------------------------------------------------- time


def time_start(
    deps: AgentDeps, budget_seconds: int | None, end: dt.datetime | None
) -> dict[str, Any]:
    """Start the home's countdown: ``budget_seconds`` from now, or until ``end``."""
    with agent_session(deps) as session:
        if end is None:
            assert budget_seconds is not None  # noqa: S101 - the CLI gives exactly one
            try:
                deadline = session.now + dt.timedelta(seconds=budget_seconds)
            except OverflowError:
                raise UsageError(
                    "--budget-seconds: the deadline is outside what the chain can hold"
                ) from None
            source = "budget_seconds"
        else:
            deadline = end
            source = "end"
        payload = {
            "deadline": format_ts(deadline),
            "budget_seconds": budget_seconds,
            "source": source,
        }
        sealed = session.append("time.started", payload)
        countdown = agent_time.Countdown(deadline, "start", session.now, budget_seconds)
    return {**countdown.as_json(), "entry_hash": sealed.entry_hash}


def time_status(
    deps: AgentDeps, budget_end: dt.datetime | None, now: dt.datetime
) -> dict[str, Any]:
    """The countdown in force (read-only; the chain is read only without the variable)."""
    if budget_end is not None:
        return agent_time.Countdown(budget_end, "env", now).as_json()
    with agent_session(deps, write=False) as session:
        countdown = countdown_from(session.agents, None, session.now)
        view = agent_time.no_countdown() if countdown is None else countdown.as_json()
        view["diagnostic"] = session.problem
    return view


# --------------------------------------------------------------------------- status


def agent_status(deps: AgentDeps, budget_end: dt.datetime | None) -> dict[str, Any]:
    """Every active agent budget (read-only): convoys, workflows, tool budgets, countdown."""
    with agent_session(deps, write=False) as session:
        agents = session.agents
        now_ts = session.now_ts
        convoys = [
            agent_tokens.convoy_report(name, agents["convoys"][name], now_ts)
            for name in sorted(agents["convoys"])
        ]
        workflows = [
            agent_turns.assess(name, agents["workflows"][name]).as_json()
            for name in sorted(agents["workflows"])
        ]
        tools = [
            agent_tools.ToolView.of(name, agents["tools"][name]).as_json()
            for name in sorted(agents["tools"])
        ]
        countdown = countdown_from(agents, budget_end, session.now)
        return {
            "convoys": convoys,
            "workflows": workflows,
            "agents": tools,
            "time": None if countdown is None else countdown.as_json(),
            "diagnostic": session.problem,
        }
