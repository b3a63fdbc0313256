"""The agent-budget fold: pure, deterministic, small, tolerant of unknown entries."""

import copy
import json

import pytest

from ledger.core.agents import AGENT_EVENT_PREFIXES, apply_agent_event, empty_agents_state
from ledger.core.state import apply_entry, empty_state

T0 = "2026-01-01T00:00:00.000000Z"
T1 = "2026-01-01T00:01:00.000000Z"
T2 = "2026-01-01T00:20:00.000000Z"
EXP = "2026-01-01T00:15:00.000000Z"
REF1 = "1" * 64
REF2 = "2" * 64


def convoy_created(name="c"):
    return (
        "tokens.budget_created",
        {"convoy": name, "convoy_max_tokens": 1000, "agent_max_tokens": 500, "warn_pct": "80"},
    )


def check(agent="a", tokens=100, expires=EXP):
    return (
        "tokens.check",
        {
            "convoy": "c",
            "agent": agent,
            "projected_tokens": tokens,
            "allowed": True,
            "reason": "ok",
            "reservation": {"tokens": tokens, "expires_at": expires},
        },
    )


def record(agent="a", settled=None, tokens_in=10, tokens_out=5):
    return (
        "tokens.record",
        {
            "convoy": "c",
            "agent": agent,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "check_ref": settled,
            "settled_ref": settled,
            "known_convoy": True,
        },
    )


def fold(events):
    state = empty_agents_state()
    for index, (event_type, ts, payload) in enumerate(events):
        apply_agent_event(state, event_type, ts, payload, f"{index:064x}")
    return state


def test_prefixes_cover_every_family():
    assert {"tokens", "turns", "tools", "time", "hook"} <= AGENT_EVENT_PREFIXES


def test_reservation_is_added_settled_and_usage_counted():
    state = empty_agents_state()
    event, payload = convoy_created()
    apply_agent_event(state, event, T0, payload, "0" * 64)
    event, payload = check()
    apply_agent_event(state, event, T0, payload, REF1)
    assert state["convoys"]["c"]["reservations"][REF1]["tokens"] == 100
    event, payload = record(settled=REF1)
    apply_agent_event(state, event, T1, payload, REF2)
    convoy = state["convoys"]["c"]
    assert convoy["reservations"] == {}
    assert (convoy["input"], convoy["output"]) == (10, 5)
    assert convoy["agents"]["a"] == {"input": 10, "output": 5, "calls": 1}


def test_expired_reservations_are_dropped_by_the_next_event():
    state = empty_agents_state()
    apply_agent_event(state, "tokens.budget_created", T0, convoy_created()[1], "0" * 64)
    apply_agent_event(state, "tokens.check", T0, check()[1], REF1)
    apply_agent_event(
        state,
        "tokens.check",
        T2,
        check(agent="b")[1]
        | {"reservation": {"tokens": 1, "expires_at": "2026-01-01T00:30:00.000000Z"}},
        REF2,
    )
    assert list(state["convoys"]["c"]["reservations"]) == [REF2]


def test_a_refused_check_reserves_nothing():
    state = empty_agents_state()
    apply_agent_event(state, "tokens.budget_created", T0, convoy_created()[1], "0" * 64)
    apply_agent_event(
        state, "tokens.check", T0, {**check()[1], "allowed": False, "reservation": None}, REF1
    )
    assert state["convoys"]["c"]["reservations"] == {}


def test_deleted_convoy_is_gone_and_later_events_for_it_are_ignored():
    state = empty_agents_state()
    apply_agent_event(state, "tokens.budget_created", T0, convoy_created()[1], "0" * 64)
    apply_agent_event(state, "tokens.budget_deleted", T0, {"convoy": "c"}, "1" * 64)
    apply_agent_event(state, "tokens.record", T1, record()[1], "2" * 64)
    apply_agent_event(state, "tokens.check", T1, check()[1], "3" * 64)
    assert state["convoys"] == {}


def test_turns_and_phases():
    state = empty_agents_state()
    apply_agent_event(
        state,
        "turns.budget_created",
        T0,
        {"workflow": "w", "total": 10, "phase": 5, "phase_name": "initial", "replaced": False},
        "0" * 64,
    )
    for kind in ("tool_use", "file_change", "delegation"):
        apply_agent_event(
            state,
            "turns.turn",
            T0,
            {"workflow": "w", "type": kind, "budget_applies": True},
            "1" * 64,
        )
    apply_agent_event(
        state,
        "turns.phase_started",
        T1,
        {"workflow": "w", "phase_name": "build", "phase": 3},
        "2" * 64,
    )
    apply_agent_event(
        state,
        "hook.pre_tool_use",
        T1,
        {"workflow": "w", "turn_counted": True, "agent": None, "tool_call": None},
        "3" * 64,
    )
    apply_agent_event(
        state,
        "hook.pre_tool_use",
        T1,
        {"workflow": "w", "turn_counted": False, "agent": None, "tool_call": None},
        "4" * 64,
    )
    flow = state["workflows"]["w"]
    assert (flow["used_total"], flow["used_phase"], flow["phase"], flow["phase_name"]) == (
        4,
        1,
        3,
        "build",
    )
    assert flow["by_type"] == {"tool_use": 2, "file_change": 1, "delegation": 1}


def test_tool_calls_are_counts_not_lists():
    state = empty_agents_state()
    apply_agent_event(
        state, "tools.budget_created", T0, {"agent": "b", "role": "builder", "budget": 5}, "0" * 64
    )
    for index in range(1000):
        outcome = ("counted", "exempt", "refused")[index % 3]
        apply_agent_event(
            state,
            "tools.use",
            T0,
            {"agent": "b", "exempt": False, "outcome": outcome},
            f"{index:064x}",
        )
        apply_agent_event(
            state,
            "hook.pre_tool_use",
            T0,
            {"agent": "b", "tool_call": "counted", "workflow": None},
            f"{index:064x}",
        )
    assert state["tools"]["b"] == {
        "role": "builder",
        "total": 5,
        "used": 334 + 1000,
        "exempt": 333,
        "refused": 333,
        "created_at": T0,
    }
    assert len(json.dumps(state)) < 500


def test_unknown_event_types_change_nothing_and_malformed_payloads_raise():
    state = empty_agents_state()
    before = copy.deepcopy(state)
    apply_agent_event(state, "tokens.future_thing", T0, {"x": 1}, "0" * 64)
    assert state == before
    # The fold never skips silently what it cannot read: the caller halts instead
    # (core.state.fold_verified turns this into counter_inconsistent).
    with pytest.raises(KeyError):
        apply_agent_event(state, "tokens.budget_created", T0, {"convoy": "c"}, "0" * 64)


def test_the_fold_is_deterministic_and_replays_identically():
    events = [
        ("tokens.budget_created", T0, convoy_created()[1]),
        ("tokens.check", T0, check()[1]),
        ("tokens.record", T1, record(settled="0" * 63 + "1")[1]),
        ("time.started", T1, {"deadline": T2, "budget_seconds": 1140, "source": "budget_seconds"}),
    ]
    assert fold(events) == fold(events)
    assert fold(events)["time"] == {"deadline": T2, "budget_seconds": 1140, "started_at": T1}


def test_state_dispatches_agent_families_and_tolerates_an_old_empty_state():
    state = empty_state()
    state["agents"] = {}  # as saved by a version before agent budgets
    apply_entry(state, "tokens.budget_created", T0, convoy_created()[1], "0" * 64)
    assert "c" in state["agents"]["convoys"]
    assert state["meta"]["entries"] == 1
