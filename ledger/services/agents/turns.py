"""Workflow turn budgets (seed 000): advisory, so they fail open and say why."""

from typing import Any

from ledger.core.agents import turns as agent_turns
from ledger.core.agents.ids import UnknownBudgetError
from ledger.services.agents import clip
from ledger.services.agents.session import AgentDeps, AgentSession, agent_session


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
            "diagnostic": clip(session.problem),
        }
        sealed = session.append("turns.check", payload)
    return {"check_ref": sealed.entry_hash, **view}
