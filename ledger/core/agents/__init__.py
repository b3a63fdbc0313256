"""Agent budgets (tokens, turns, tool calls, time) as a fold over chain events.

The state is a replay of the chain: ``apply_agent_event`` is pure and
deterministic, folds payloads already checked against their schemas
(``core.foldable``), and keeps the state
small — counts, not lists of calls; settled and expired reservations are
dropped (expiry is judged by the folded entry's own ``ts_utc``).

Event types (one JSON Schema each in ``schemas/``):

- ``tokens.budget_created`` / ``tokens.budget_deleted`` — a convoy's limits.
- ``tokens.check`` — a check; an admitted one carries ``reservation``.
- ``tokens.record`` — actual use; ``settled_ref`` names the reservation it settles.
- ``turns.budget_created`` / ``turns.phase_started`` / ``turns.turn`` / ``turns.check``.
- ``tools.budget_created`` / ``tools.use`` / ``tools.check``.
- ``time.started`` — a countdown deadline.
- ``hook.pre_tool_use`` — one PreToolUse hook call: the turn and the tool call it
  counted, sealed together.
"""

from collections.abc import Callable
from typing import Any

AGENT_EVENT_PREFIXES = frozenset({"tokens", "turns", "tools", "time", "hook"})
_TABLES = ("convoys", "workflows", "tools")


def empty_agents_state() -> dict[str, Any]:
    """The agent-budget state of an empty chain."""
    return {"convoys": {}, "workflows": {}, "tools": {}, "time": None}


def _prune_reservations(convoy: dict[str, Any], ts_utc: str) -> None:
    reservations = convoy["reservations"]
    for ref in [r for r, res in reservations.items() if res["expires_at"] <= ts_utc]:
        del reservations[ref]


def _tokens_created(agents: dict[str, Any], ts: str, payload: dict[str, Any], _ref: str) -> None:
    agents["convoys"][str(payload["convoy"])] = {
        "convoy_max": int(payload["convoy_max_tokens"]),
        "agent_max": int(payload["agent_max_tokens"]),
        "warn_pct": str(payload["warn_pct"]),
        "created_at": ts,
        "input": 0,
        "output": 0,
        "agents": {},
        "reservations": {},
    }


def _tokens_deleted(agents: dict[str, Any], _ts: str, payload: dict[str, Any], _ref: str) -> None:
    agents["convoys"].pop(str(payload["convoy"]), None)


def _tokens_check(agents: dict[str, Any], ts: str, payload: dict[str, Any], ref: str) -> None:
    convoy = agents["convoys"].get(payload["convoy"])
    if convoy is None:
        return
    _prune_reservations(convoy, ts)
    reservation = payload.get("reservation")
    if isinstance(reservation, dict) and reservation["expires_at"] > ts:
        convoy["reservations"][ref] = {
            "agent": str(payload["agent"]),
            "tokens": int(reservation["tokens"]),
            "expires_at": str(reservation["expires_at"]),
            "ts": ts,
        }


def _tokens_record(agents: dict[str, Any], ts: str, payload: dict[str, Any], _ref: str) -> None:
    convoy = agents["convoys"].get(payload["convoy"])
    if convoy is None:
        return
    tokens_in, tokens_out = int(payload["input_tokens"]), int(payload["output_tokens"])
    agent = str(payload["agent"])
    _prune_reservations(convoy, ts)
    settled = payload.get("settled_ref")
    if settled:
        convoy["reservations"].pop(settled, None)
    convoy["input"] += tokens_in
    convoy["output"] += tokens_out
    record = convoy["agents"].setdefault(agent, {"input": 0, "output": 0, "calls": 0})
    record["input"] += tokens_in
    record["output"] += tokens_out
    record["calls"] += 1


def _turns_created(agents: dict[str, Any], ts: str, payload: dict[str, Any], _ref: str) -> None:
    agents["workflows"][str(payload["workflow"])] = {
        "total": int(payload["total"]),
        "phase": int(payload["phase"]),
        "phase_name": str(payload["phase_name"]),
        "used_total": 0,
        "used_phase": 0,
        "by_type": {},
        "created_at": ts,
        "phase_started_at": ts,
    }


def _turns_phase(agents: dict[str, Any], ts: str, payload: dict[str, Any], _ref: str) -> None:
    workflow = agents["workflows"].get(payload["workflow"])
    if workflow is None:
        return
    limit = payload.get("phase")
    workflow["phase_name"] = str(payload["phase_name"])
    if limit is not None:
        workflow["phase"] = int(limit)
    workflow["used_phase"] = 0
    workflow["phase_started_at"] = ts


def _count_turn(agents: dict[str, Any], name: Any, kind: str) -> None:
    workflow = agents["workflows"].get(name)
    if workflow is None:
        return
    workflow["used_total"] += 1
    workflow["used_phase"] += 1
    by_type = workflow.setdefault("by_type", {})
    by_type[kind] = by_type.get(kind, 0) + 1


def _turns_turn(agents: dict[str, Any], _ts: str, payload: dict[str, Any], _ref: str) -> None:
    _count_turn(agents, payload["workflow"], str(payload["type"]))


def _tools_created(agents: dict[str, Any], ts: str, payload: dict[str, Any], _ref: str) -> None:
    total = payload["budget"]
    agents["tools"][str(payload["agent"])] = {
        "role": str(payload["role"]),
        "total": None if total is None else int(total),
        "used": 0,
        "exempt": 0,
        "refused": 0,
        "created_at": ts,
    }


def _count_tool(agents: dict[str, Any], name: Any, outcome: Any) -> None:
    state = agents["tools"].get(name)
    if state is None:
        return
    if outcome == "counted":
        state["used"] += 1
    elif outcome == "exempt":
        state["exempt"] = state.get("exempt", 0) + 1
    elif outcome == "refused":
        state["refused"] = state.get("refused", 0) + 1


def _tools_use(agents: dict[str, Any], _ts: str, payload: dict[str, Any], _ref: str) -> None:
    _count_tool(agents, payload["agent"], payload["outcome"])


def _time_started(agents: dict[str, Any], ts: str, payload: dict[str, Any], _ref: str) -> None:
    budget = payload.get("budget_seconds")
    agents["time"] = {
        "deadline": str(payload["deadline"]),
        "budget_seconds": None if budget is None else int(budget),
        "started_at": ts,
    }


def _pre_tool_use(agents: dict[str, Any], _ts: str, payload: dict[str, Any], _ref: str) -> None:
    if payload.get("turn_counted") and payload.get("workflow") is not None:
        _count_turn(agents, payload["workflow"], "tool_use")
    if payload.get("agent") is not None and payload.get("tool_call") is not None:
        _count_tool(agents, payload["agent"], payload["tool_call"])


_Handler = Callable[[dict[str, Any], str, dict[str, Any], str], None]
_HANDLERS: dict[str, _Handler] = {
    "tokens.budget_created": _tokens_created,
    "tokens.budget_deleted": _tokens_deleted,
    "tokens.check": _tokens_check,
    "tokens.record": _tokens_record,
    "turns.budget_created": _turns_created,
    "turns.phase_started": _turns_phase,
    "turns.turn": _turns_turn,
    "tools.budget_created": _tools_created,
    "tools.use": _tools_use,
    "time.started": _time_started,
    "hook.pre_tool_use": _pre_tool_use,
}


def ensure_tables(agents: dict[str, Any]) -> dict[str, Any]:
    """Fill in the tables a state saved by an older version may lack (in place)."""
    for table in _TABLES:
        if not isinstance(agents.get(table), dict):
            agents[table] = {}
    agents.setdefault("time", None)
    return agents


def apply_agent_event(
    agents: dict[str, Any], event_type: str, ts_utc: str, payload: dict[str, Any], entry_hash: str
) -> None:
    """Fold one agent-budget event into the state (in place).

    Check events (``*.check``) change nothing but are part of the audit trail.
    Payloads read from the chain are checked before they get here
    (``core.foldable``); a fold that still fails raises, and the caller halts
    the counter rather than skip the entry (skipping could forget use).
    """
    handler = _HANDLERS.get(event_type)
    if handler is None:
        return
    ensure_tables(agents)
    handler(agents, ts_utc, payload, entry_hash)
