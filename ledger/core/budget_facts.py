"""What any budget's counters are counted from, kept per quarter hour (SPEC §21).

A budget added to ``ledger.toml`` needs the spend of its current period at
once, and on a busy home a month is a million records: folding them again
would keep the next verdict waiting for minutes. Since a record counts on a
budget by what its call was known by (``core.budget_state``), the facts a
fold needs can be kept before anyone asks which budget they are for:

- **cells**: for each record, where it counts if a budget matches it. A
  record that settles a live reservation counts, on a budget its verdict's
  scope matches, in its verdict's period; on any other budget its own scope
  matches, in its own. So a cell is keyed by the live verdict's scope and
  quarter hour (none when nothing was live), the record's scope and quarter
  hour; it holds the micro-USD and the chain line and time of its newest
  record (a counter shows when it last spent);
- **pending**: the reservations still live (a verdict not yet recorded,
  before its expiry), with their scope, time, amount and expiry;
- **doubts**: quarter hours holding what these facts do not count exactly (a
  record without a price, an operator's reset with prices sealed later, an
  entry that cannot be folded); a budget whose period touches one is folded
  from the chain instead;
- the newest time of any budget entry (reservations expire against it).

``FactsFold`` keeps them as the chain is read; ``counted`` turns them into one
budget's counters at the head, or ``None`` when they cannot say exactly.
Everything here is pure; the rollups keep the facts on disk.
"""

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from ledger.core.budget_calendar import period_key
from ledger.core.budget_periods import PeriodsAt
from ledger.core.budget_state import FOREVER, NO_VALUE, VERDICT_EVENTS
from ledger.core.budgets import TOTAL_PERIOD, Budget, CallScope, budget_index
from ledger.core.rollups import slot_of, slot_start
from ledger.core.state import OPERATOR_RESETS
from ledger.core.timefmt import parse_ts

RECORD_EVENT = "budget.record_call"
NO_SLOT = -1  # the verdict slot of a cell whose record settled nothing live
# The totals kept beside the facts before any entry was folded (``max_ts``: the
# newest budget entry's time; the rest count rows and micro-USD, so a row
# removed from the store is found).
NO_FACTS: dict[str, Any] = {"max_ts": None, "cells": 0, "micros": 0, "pending": 0, "doubts": 0}


class Pending(NamedTuple):
    """A live reservation: the verdict's scope, time, amount and expiry."""

    scope: CallScope
    ts: str
    micros: int
    expires: str


class CellKey(NamedTuple):
    """Where a record counts: its live verdict's scope and slot (or none), its own."""

    v_scope: CallScope | None
    v_slot: int
    r_scope: CallScope
    r_slot: int


class Cell(NamedTuple):
    """What the records of one cell add: micro-USD, and the newest one's line and time."""

    micros: int
    last_line: int
    last_ts: str


def merge(old: Cell | None, new: Cell) -> Cell:
    """Two parts of one cell as one."""
    if old is None:
        return new
    newest = new if new.last_line >= old.last_line else old
    return Cell(old.micros + new.micros, newest.last_line, newest.last_ts)


class FactsFold:
    """Folds budget entries into facts, in chain order (the batch's part of them).

    ``find_pending`` answers for reservations made before this batch (the
    stored ones); what this batch made or settled is in ``added``/``settled``.
    """

    def __init__(self, max_ts: str | None, find_pending: Callable[[str], Pending | None]) -> None:
        self.max_ts = max_ts
        self._find = find_pending
        self.cells: dict[CellKey, Cell] = {}
        self.added: dict[str, Pending] = {}
        self.settled: set[str] = set()
        self.doubts: set[int] = set()

    def doubt(self, ts_utc: str) -> None:
        """An entry at ``ts_utc`` these facts do not count exactly."""
        self.doubts.add(slot_of(parse_ts(ts_utc)))

    def feed(
        self, line: int, event_type: str, ts_utc: str, payload: Mapping[str, Any] | None, ref: str
    ) -> None:
        """One entry (``payload``: as checked for the fold; ``None``: it cannot be folded)."""
        if event_type in OPERATOR_RESETS:
            if payload is None or isinstance(payload.get("priced"), list):
                self.doubt(ts_utc)
            return
        if not event_type.startswith("budget."):
            return
        if payload is None:
            self.doubt(ts_utc)
            return
        if self.max_ts is None or ts_utc > self.max_ts:
            self.max_ts = ts_utc  # what every reservation expires against, as the fold's
        if event_type in VERDICT_EVENTS:
            reservation = payload.get("reservation")
            if isinstance(reservation, dict):
                expires = FOREVER if reservation.get("forwarded") else reservation["expires_at"]
                scope = CallScope.from_payload(payload)
                self.added[ref] = Pending(scope, ts_utc, int(reservation["micros"]), expires)
        elif event_type == RECORD_EVENT:
            self._record(line, ts_utc, payload)

    def _record(self, line: int, ts_utc: str, payload: Mapping[str, Any]) -> None:
        verdict_ref = payload.get("verdict_ref")
        live = self._pop(verdict_ref) if isinstance(verdict_ref, str) else None
        if live is not None and live.expires <= str(self.max_ts):
            live = None  # expired by now: the fold forgot it already
        actual = payload.get("actual_micros")
        if not isinstance(actual, int) or isinstance(actual, bool):
            self.doubt(ts_utc)  # unpriced: held apart until priced
            return
        slot = slot_of(parse_ts(ts_utc))
        key = CellKey(
            None if live is None else live.scope,
            NO_SLOT if live is None else slot_of(parse_ts(live.ts)),
            CallScope.from_payload(payload),
            slot,
        )
        self.cells[key] = merge(self.cells.get(key), Cell(actual, line, ts_utc))

    def _pop(self, ref: str) -> Pending | None:
        found = self.added.pop(ref, None)
        if found is not None:
            return found
        if ref in self.settled:
            return None
        found = self._find(ref)
        if found is not None:
            self.settled.add(ref)
        return found


class Counted(NamedTuple):
    """One budget's counters from the facts, and the reservations held on them."""

    table: dict[str, Any]
    # (verdict ref, expiry, [budget name, value, period key]) for ``state["open"]``.
    opens: list[tuple[str, str, list[Any]]]


def first_slot(budget: Budget, head: dt.datetime, zone: dt.tzinfo, backstep: dt.timedelta) -> int:
    """The earliest record slot whose spend can count in ``budget``'s period at ``head``.

    A record is sealed after its verdict, its time at most ``backstep`` earlier.
    """
    if budget.period == TOTAL_PERIOD:
        return -(2**62)
    start, _end, _s, _e = PeriodsAt(head, zone).bounds(budget)
    return slot_of(start - backstep) - 1


def counted(
    budget: Budget,
    head: dt.datetime,
    zone: dt.tzinfo,
    cells: Iterable[tuple[CellKey, Cell]],
    pending: Iterable[tuple[str, Pending]],
    doubt_slots: Iterable[int],
    max_ts: str | None,
) -> Counted | None:
    """``budget``'s counters at the head (its newest entry at ``head``), or ``None``.

    ``cells`` must hold every cell whose record slot is at or after
    ``first_slot``; ``pending`` every live reservation. ``None`` for a rolling
    window (its items keep minutes, not quarter hours), a period that does not
    start on a quarter hour, a doubt in the period, or a live reservation
    admitted in another period: the caller folds the chain then.
    """
    if budget.window_seconds is not None or any(True for _ in doubt_slots):
        return None
    periods = PeriodsAt(head, zone)
    key = periods.key(budget)
    start_slot = -(2**62)
    if budget.period != TOTAL_PERIOD:
        start, _end, _s, _e = periods.bounds(budget)
        start_slot = slot_of(start)
        if slot_start(start_slot) != start:
            return None  # a zone whose midnight is not on a quarter hour
    index = budget_index((budget,))
    per_value: dict[CallScope, str | None] = {}

    def value_of(scope: CallScope) -> str | None:
        """The scope's counter on ``budget`` (``None``: the budget does not match it)."""
        if scope not in per_value:
            found = index.applicable(scope)
            per_value[scope] = (found[0].per_value or NO_VALUE) if found else None
        return per_value[scope]

    values: dict[str, dict[str, Any]] = {}
    newest: dict[str, int] = {}
    for cell_key, cell in cells:
        value, slot = None, cell_key.r_slot
        if cell_key.v_scope is not None:
            value, slot = value_of(cell_key.v_scope), cell_key.v_slot
        if value is None:
            value, slot = value_of(cell_key.r_scope), cell_key.r_slot
        if value is None or slot < start_slot:
            continue  # not this budget's, or counted in a period that has ended
        counter = values.setdefault(value, _new_counter())
        counter["used"] += cell.micros
        if cell.last_line > newest.get(value, 0):
            newest[value] = cell.last_line
            counter["last"] = cell.last_ts
    opens = []
    for ref, held in pending:
        if max_ts is not None and held.expires <= max_ts:
            continue
        value = value_of(held.scope)
        if value is None:
            continue
        if period_key(budget, parse_ts(held.ts), zone) != key:
            return None  # held in another period: where it counts depends on order
        values.setdefault(value, _new_counter())["open"][ref] = [held.micros, held.expires]
        opens.append((ref, held.expires, [budget.name, value, key]))
    return Counted({"period": key, "values": values}, opens)


def _new_counter() -> dict[str, Any]:
    return {"used": 0, "items": [], "open": {}, "last": None}
