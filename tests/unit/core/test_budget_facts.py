"""A budget counted from the facts equals the same budget folded from its entries."""

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.budget_facts import Cell, CellKey, FactsFold, Pending, counted, first_slot
from ledger.core.budget_state import apply_budget_event, empty_budget_state, figures
from ledger.core.budgets import Applicable, Budget, CallScope, parse_budgets
from ledger.core.timefmt import format_ts, parse_ts

DEFINITIONS = [
    {"name": "month", "usd": 50, "period": "month"},
    {"name": "day", "usd": 5, "period": "day"},
    {"name": "ever", "usd": 500, "period": "total"},
    {"name": "alice", "usd": 5, "period": "day", "match": {"agent": "alice"}},
    {"name": "sessions", "usd": 5, "period": "day", "per": "session"},
    {"name": "opus", "usd": 9, "period": "week", "match": {"model": "*opus*"}, "per": "agent"},
]
BUDGETS = parse_budgets(DEFINITIONS, "budgets")
START = dt.datetime(2026, 11, 30, 21, 0, tzinfo=dt.UTC)
SCOPES = [
    {"agent": "alice", "model": "claude-opus-4", "cycle_id": "s1"},
    {"agent": "bob", "model": "claude-haiku", "cycle_id": "s2"},
    {"agent": "alice", "model": "claude-haiku"},
    {"model": "claude-opus-4", "cycle_id": "s1"},
    {},
]

# One step: seconds after the last, a verdict or a record, which scope, which
# verdict a record names (an index into the verdicts so far; -1: none).
STEP = st.tuples(
    st.sampled_from([0, 1, 7, 60, 400, 3_000, 40_000]),
    st.sampled_from(["verdict", "verdict", "record", "record", "forwarded", "halt"]),
    st.integers(0, len(SCOPES) - 1),
    st.integers(-1, 12),
    st.integers(0, 3_000_000),
    st.sampled_from([30, 600, 7_200]),
    st.booleans(),
)


def _events(steps: list[Any]) -> list[tuple[str, str, dict[str, Any], str]]:
    events, verdicts, moment = [], [], START
    for number, (gap, kind, scope, names, micros, ttl, priced) in enumerate(steps, start=1):
        moment += dt.timedelta(seconds=gap)
        ts = format_ts(moment)
        ref = f"{number:064x}"
        payload: dict[str, Any] = dict(SCOPES[scope])
        if kind in ("verdict", "forwarded"):
            expires = format_ts(moment + dt.timedelta(seconds=ttl))
            payload["reservation"] = {"micros": micros, "expires_at": expires}
            if kind == "forwarded":
                payload["reservation"]["forwarded"] = True
            events.append(("budget.allow", ts, payload, ref))
            verdicts.append(ref)
        elif kind == "halt":
            events.append(("budget.halt_100", ts, payload, ref))
        else:
            if 0 <= names < len(verdicts):
                payload["verdict_ref"] = verdicts[names]
            payload["actual_micros"] = micros if priced or micros % 5 else None
            events.append(("budget.record_call", ts, payload, ref))
    return events


def _folded(budgets: tuple[Budget, ...], events: Any, zone: dt.tzinfo) -> dict[str, Any]:
    state = empty_budget_state(budgets)
    for event_type, ts, payload, ref in events:
        apply_budget_event(state, budgets, event_type, ts, payload, ref, zone)
    return state


def _from_facts(budget: Budget, events: Any, zone: dt.tzinfo) -> dict[str, Any] | None:
    fold = FactsFold(None, lambda _ref: None)
    for line, (event_type, ts, payload, ref) in enumerate(events, start=1):
        fold.feed(line, event_type, ts, payload, ref)
    head = max(parse_ts(ts) for _t, ts, _p, _r in events)
    since = first_slot(budget, head, zone, dt.timedelta(0))
    cells: list[tuple[CellKey, Cell]] = [(k, c) for k, c in fold.cells.items() if k.r_slot >= since]
    pending: list[tuple[str, Pending]] = list(fold.added.items())
    doubts = [slot for slot in fold.doubts if slot >= since]
    found = counted(budget, head, zone, cells, pending, doubts, fold.max_ts)
    if found is None:
        return None
    state = empty_budget_state((budget,))
    state["by_name"][budget.name] = found.table
    for ref, expires, count in found.opens:
        state["open"].setdefault(ref, {"expires_at": expires, "counts": []})["counts"].append(count)
    return state


def _values(events: Any) -> set[str | None]:
    values: set[str | None] = {None}
    for _t, _ts, payload, _r in events:
        scope = CallScope.from_payload(payload)
        values.update({scope.agent, scope.session})
    return values


@settings(max_examples=300, deadline=None)
@given(
    st.lists(STEP, min_size=1, max_size=40),
    st.sampled_from(["UTC", "Asia/Kathmandu", "America/New_York"]),
    st.integers(0, len(BUDGETS) - 1),
)
def test_a_budget_from_the_facts_reads_as_the_fold_of_every_budget(steps, zone_name, which):
    zone = ZoneInfo(zone_name)
    events = _events(steps)
    budget = BUDGETS[which]
    full = _folded(BUDGETS, events, zone)
    alone = _from_facts(budget, events, zone)
    if alone is None:
        return  # the facts said they cannot tell: the chain is folded instead
    head = max(parse_ts(ts) for _t, ts, _p, _r in events)
    for later in (dt.timedelta(0), dt.timedelta(seconds=45), dt.timedelta(hours=3)):
        for value in _values(events):
            found = Applicable(budget, value if budget.per else None)
            want = figures(full, found, head + later, zone)
            got = figures(alone, found, head + later, zone)
            assert got[3:] == want[3:], (value, later)


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=40), st.integers(0, len(BUDGETS) - 1))
def test_each_budgets_counters_are_a_fold_of_their_own(steps, which):
    zone = ZoneInfo("UTC")
    events = _events(steps)
    budget = BUDGETS[which]
    full = _folded(BUDGETS, events, zone)
    alone = _folded((budget,), events, zone)
    head = max(parse_ts(ts) for _t, ts, _p, _r in events)
    for value in _values(events):
        found = Applicable(budget, value if budget.per else None)
        assert figures(full, found, head, zone)[3:] == figures(alone, found, head, zone)[3:]


def test_the_facts_decline_a_period_with_an_unpriced_record():
    zone = dt.UTC
    budget = BUDGETS[0]
    events = [("budget.record_call", "2026-11-30T21:00:00.000000Z", {"actual_micros": None}, "a")]
    assert _from_facts(budget, events, zone) is None


def test_a_record_counts_on_a_budget_only_its_own_scope_matches():
    zone = dt.UTC
    alice = BUDGETS[3]
    verdict = {"agent": "bob", "reservation": {"micros": 5, "expires_at": "2099-01-01T00:00:00Z"}}
    record = {"agent": "alice", "verdict_ref": "v", "actual_micros": 1_000}
    events = [
        ("budget.allow", "2026-11-30T21:00:00.000000Z", verdict, "v"),
        ("budget.record_call", "2026-11-30T21:00:01.000000Z", record, "r"),
    ]
    state = _folded(BUDGETS, events, zone)
    head = parse_ts("2026-11-30T21:00:01.000000Z")
    assert figures(state, Applicable(alice, None), head, zone).used_micros == 1_000
    alone = _from_facts(alice, events, zone)
    assert alone is not None
    assert figures(alone, Applicable(alice, None), head, zone).used_micros == 1_000
