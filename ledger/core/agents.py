"""Agent budgets (tokens, turns, tool calls, time) as a fold over chain events."""

from typing import Any

AGENT_EVENT_PREFIXES = frozenset({"tokens", "turns", "tools", "time"})


def empty_agents_state() -> dict[str, Any]:
    """The agent-budget state of an empty chain."""
    return {}


def apply_agent_event(
    agents: dict[str, Any], event_type: str, ts_utc: str, payload: dict[str, Any], entry_hash: str
) -> None:
    """Fold one agent-budget event into the state (in place)."""
    del agents, event_type, ts_utc, payload, entry_hash
