"""Per-agent tool-call budgets by role (seed 001).

A hard budget: an untrusted counter or an agent without a budget refuses
(fail-closed); exempt actions are admitted and not counted.
"""

from fractions import Fraction
from typing import Any, NamedTuple

from ledger.core.agents import tools as agent_tools
from ledger.services.agents import clip
from ledger.services.agents.session import AgentDeps, AgentSession, agent_session


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
            "reason": clip(refusal),
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
            "reason": clip(refusal),
        }
        sealed = session.append("tools.check", payload)
        view = _tool_view(session, agent)
    view.update({"allowed": allowed, "reason": refusal, "check_ref": sealed.entry_hash})
    if state is None:
        view["message"] = refusal
    return ToolAnswer(allowed, view)
