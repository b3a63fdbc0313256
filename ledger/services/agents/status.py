"""Every active agent budget at once, read-only (``ledger status``)."""

import datetime as dt
from typing import Any

from ledger.core.agents import tokens as agent_tokens
from ledger.core.agents import tools as agent_tools
from ledger.core.agents import turns as agent_turns
from ledger.core.agents.time import countdown_from
from ledger.services.agents.session import AgentDeps, agent_session


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
