"""Budgets' counters as a fold over chain events, and the figures a verdict reads.

Kept in the derived state beside the USD caps' (``state["budgets"]``), as
plain JSON. For each budget and each value of its ``per`` key there is one
counter: a calendar budget's holds the spend of its current period (a newer
period resets the budget's counters, so ended periods are pruned as the chain
moves on); a rolling budget's holds a bounded list of items inside its window
(dropped as they leave it): one per minute for the last hour, one per slot
beyond (``ledger.core.rolling_items``), so "spend sealed within the window
before now" is exact to the minute for recent spend and within a slot for
older, a few hundred items at most. Spend never leaves a window early. Open
reservations are kept per counter, so a verdict reads only the counters of the
budgets that apply to it.

The state remembers the fingerprint of the definitions it was folded under; a
state folded under other definitions is rebuilt from the chain, never trusted.

A budget's counters (``table["values"]``) are a mapping from value to counter:
a plain dict in memory, or a store that reads a counter only when it is asked
for (a budget with ``per`` may count a hundred thousand sessions, and a verdict
touches one of them). So the fold asks only for the counters an event touches:
a rolling window's old items are dropped from each counter it touches, and
counters left empty are dropped by the store (``counter_is_live``); only a
plain dict is swept whole, once a minute.
"""

import datetime as dt
import functools
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NamedTuple

from ledger.core.budget_periods import PeriodsAt
from ledger.core.budgets import (
    Applicable,
    Budget,
    CallScope,
    budget_index,
    counting_key,
    fingerprint,
)
from ledger.core.rolling_items import add_item, coarse_minutes, minute_of, settle
from ledger.core.spend import ScopeState
from ledger.core.timefmt import format_ts, parse_ts

VERDICT_EVENTS = frozenset({"budget.allow", "budget.warn_90"})
NO_VALUE = ""  # the counter of a budget without ``per``


def empty_budget_state(budgets: Sequence[Budget] = ()) -> dict[str, Any]:
    """The budgets' state of an empty chain folded under ``budgets``."""
    # ``defs``: what each budget's counters were kept for (``counting_key``), so
    # a change of one budget recounts that budget alone.
    defs = {budget.name: counting_key(budget) for budget in budgets}
    return {"fingerprint": fingerprint(budgets), "defs": defs, "by_name": {}, "open": {}}


def _budget_table(state: dict[str, Any], budget: Budget, key: str | None) -> dict[str, Any]:
    """The budget's table, its counters reset when ``key`` starts a newer period."""
    tables: dict[str, dict[str, Any]] = state["by_name"]
    table = tables.get(budget.name)
    if table is None:
        table = tables[budget.name] = {"period": key, "values": {}}
    if key is not None and (table["period"] is None or key > table["period"]):
        table["period"] = key
        table["values"] = {}
    return table


def _counter(table: dict[str, Any], per_value: str | None) -> dict[str, Any]:
    value = per_value or NO_VALUE
    counters: dict[str, dict[str, Any]] = table["values"]
    counter = counters.get(value)
    if counter is None:
        counter = counters[value] = {"used": 0, "items": [], "open": {}, "last": None}
    cutoff = table.get("cutoff")
    if cutoff is not None:
        _settle_and_drop(table, counter, cutoff)
    return counter


def _settle_and_drop(table: dict[str, Any], counter: dict[str, Any], cutoff: str) -> None:
    """Merge the items that left the last hour, then drop those that left the window."""
    swept = table.get("swept")
    if swept is not None and counter["items"]:
        settle(counter, minute_of(swept), int(table.get("width", 1)))
    _drop_old_items(counter, cutoff)


def counter_is_live(table: dict[str, Any], counter: dict[str, Any]) -> bool:
    """Whether a counter still counts: it holds a reservation, or spend its window holds.

    A calendar period's counters live as long as the period (a newer one
    starts them afresh).
    """
    if counter["open"]:
        return True
    cutoff = table.get("cutoff")
    if cutoff is None:
        return True
    items = counter["items"]
    return bool(items) and items[-1][0] > cutoff


def _drop_old_items(counter: dict[str, Any], cutoff: str) -> None:
    items = counter["items"]
    keep = 0
    while keep < len(items) and items[keep][0] <= cutoff:
        counter["used"] -= items[keep][1]
        keep += 1
    if keep:
        del items[:keep]


def _prune_rolling(table: dict[str, Any], budget: Budget, ts_utc: str) -> None:
    """Drop the items that left the window, and counters left empty; once a minute."""
    window = budget.window_seconds
    assert window is not None  # noqa: S101 - called for rolling budgets only
    if table.get("swept") == ts_utc[:16]:
        return  # a verdict reads its own cutoff: sweeping more often only costs time
    table["swept"] = ts_utc[:16]
    table["width"] = coarse_minutes(window)
    cutoff = format_ts(parse_ts(ts_utc) - dt.timedelta(seconds=window))
    table["cutoff"] = cutoff
    if type(table["values"]) is not dict:
        return  # a store: each counter is pruned when touched, and dropped when empty
    for value in list(table["values"]):
        counter = table["values"][value]
        _settle_and_drop(table, counter, cutoff)
        if not counter["items"] and not counter["open"]:
            del table["values"][value]


FOREVER = "9999-12-31T23:59:59.999999Z"  # later than any time the chain can hold


def _expire(state: dict[str, Any], ts_utc: str) -> None:
    """Forget reservations expired by ``ts_utc``: they count for nothing any more."""
    expired = [ref for ref, res in state["open"].items() if res["expires_at"] <= ts_utc]
    for ref in expired:
        _release(state, ref)


def _release(state: dict[str, Any], ref: str) -> list[list[Any]]:
    reservation = state["open"].pop(ref, None)
    if reservation is None:
        return []
    counts: list[list[Any]] = reservation["counts"]
    for name, value, _key in counts:
        table = state["by_name"].get(name)
        counter = table["values"].get(value) if table is not None else None
        if counter is not None:
            counter["open"].pop(ref, None)
    return counts


def _add_spend(
    state: dict[str, Any], budget: Budget, value: str, key: str | None, micros: int, ts: str
) -> None:
    """Count spend on a counter, unless it belongs to a period that has ended."""
    table = state["by_name"].get(budget.name)
    ended = table is not None and table["period"] is not None and key is not None
    if ended and key < table["period"]:
        return  # a period that ended: no verdict reads it any more
    table = _budget_table(state, budget, key)
    counter = _counter(table, value or None)
    counter["used"] += micros
    counter["last"] = ts
    if budget.window_seconds is not None:
        # Records of one minute (of one slot, beyond the last hour) count
        # together as the latest of them: late, never early (``rolling_items``).
        fold_minute = minute_of(table.get("swept") or ts)
        add_item(counter, ts, micros, fold_minute, coarse_minutes(budget.window_seconds))


def apply_budget_event(
    state: dict[str, Any],
    budgets: Sequence[Budget],
    event_type: str,
    ts_utc: str,
    payload: dict[str, Any],
    entry_hash: str,
    zone: dt.tzinfo = dt.UTC,
) -> None:
    """Fold one ``budget.*`` event into the budgets' state (in place).

    An admitting verdict reserves its estimate on every budget its call
    matched, in the period it was admitted in; a record settles that
    reservation and counts on the same counters, and on every other budget
    its own scope matches, now (so each budget's counters are a fold of their
    own, whatever else is defined).
    """
    if not budgets or not event_type.startswith("budget."):
        return
    _expire(state, ts_utc)
    index = budget_index(budgets)
    periods = PeriodsAt(parse_ts(ts_utc), zone)
    for budget in index.rolling:
        table = state["by_name"].get(budget.name)
        if table is not None:
            _prune_rolling(table, budget, ts_utc)
    if event_type in VERDICT_EVENTS:
        reservation = payload.get("reservation")
        if not isinstance(reservation, dict):
            return
        counts: list[list[Any]] = []
        # A forwarded reservation is held until a record settles it (its own, or
        # the charge at its estimate sealed once it expired): it never lapses.
        expires = FOREVER if reservation.get("forwarded") else reservation["expires_at"]
        for found in index.applicable(CallScope.from_payload(payload)):
            key = periods.key(found.budget)
            value = found.per_value or NO_VALUE
            counter = _counter(_budget_table(state, found.budget, key), value or None)
            counter["open"][entry_hash] = [reservation["micros"], expires]
            counts.append([found.budget.name, value, key])
        if counts:
            state["open"][entry_hash] = {"expires_at": expires, "counts": counts}
    elif event_type == "budget.record_call":
        actual = payload.get("actual_micros")
        ref = payload.get("verdict_ref")
        counts = _release(state, ref) if isinstance(ref, str) else []
        # Every budget the call matched: those its live reservation was held on
        # (in the period it was admitted in), and any other its own scope
        # matches (now). So whether a record counts on one budget never depends
        # on which other budgets are defined, and a budget added later is
        # counted on its own (``core.budget_facts``).
        held = {name for name, _value, _key in counts}
        counts += [
            [found.budget.name, found.per_value or NO_VALUE, periods.key(found.budget)]
            for found in index.applicable(CallScope.from_payload(payload))
            if found.budget.name not in held
        ]
        if not isinstance(actual, int):
            # Unpriced: the gate halts on it until it is priced (rebuild-state seals
            # the price, and ``apply_budget_prices`` counts it here) or re-based.
            state.setdefault("unpriced", {})[entry_hash] = {"ts": ts_utc, "counts": counts}
            return
        by_name = index.by_name
        for name, value, admitted_in in counts:
            if name in by_name:
                _add_spend(state, by_name[name], value, admitted_in, actual, ts_utc)


def apply_budget_prices(
    state: dict[str, Any], budgets: Sequence[Budget], priced: list[dict[str, Any]]
) -> None:
    """Count the prices ``rebuild-state`` sealed for records that had none.

    Each counts where its record would have: on the counters it matched, in
    the period it was admitted in (a rolling window: when it was recorded).
    Only a record still unpriced is counted, so nothing is counted twice.
    """
    unpriced = state.get("unpriced") or {}
    by_name = budget_index(budgets).by_name
    for item in priced:
        record = unpriced.pop(item.get("entry_hash"), None)
        if record is None or not isinstance(item.get("actual_micros"), int):
            continue
        for name, value, admitted_in in record["counts"]:
            if name in by_name:
                _add_spend(state, by_name[name], value, admitted_in, item["actual_micros"],
                           record["ts"])  # fmt: skip


class BudgetFigures(NamedTuple):
    """One applicable budget's figures at a moment."""

    found: Applicable
    period_start: dt.datetime
    period_end: dt.datetime
    used_micros: int
    reserved_micros: int
    last_spend_ts: dt.datetime | None


def figures(
    state: dict[str, Any], found: Applicable, now: dt.datetime, zone: dt.tzinfo = dt.UTC
) -> BudgetFigures:
    """Used and reserved of one applicable budget's counter at ``now``.

    Costs the counter's open reservations and, for a rolling window, the items
    that left the window since the last entry was folded; never a chain scan.
    """
    now_text = format_ts(now)
    return _figures(state, found, PeriodsAt(now, zone, now_text), now_text)


def _figures(
    state: dict[str, Any], found: Applicable, periods: PeriodsAt, now_text: str
) -> BudgetFigures:
    budget = found.budget
    start, end, start_text, _end_text = periods.bounds(budget)
    table = state["by_name"].get(budget.name)
    counter = None
    if table is not None:
        key = periods.key(budget)
        if key is None or table["period"] == key:
            counter = table["values"].get(found.per_value or NO_VALUE)
    if counter is None:
        return BudgetFigures(found, start, end, 0, 0, None)
    held = counter["open"]  # most counters hold no reservation when a verdict reads them
    reserved = sum(micros for micros, expires in held.values() if expires > now_text) if held else 0
    used = counter["used"]
    if budget.window_seconds is not None and counter["items"]:
        for ts, micros in counter["items"]:
            if ts > start_text:
                break
            used -= micros
    last = counter["last"]
    return BudgetFigures(found, start, end, used, reserved, _last_spend(last) if last else None)


@functools.lru_cache(maxsize=256)
def _last_spend(text: str) -> dt.datetime:
    # The counters a record touched all hold its time: it is parsed once, not per budget.
    return parse_ts(text)


def window_frees(state: dict[str, Any], found: BudgetFigures, micros: int) -> dt.datetime | None:
    """When at least ``micros`` of a rolling budget's spend has left its window.

    ``None`` for a calendar budget, or when the spend in the window is less
    than ``micros`` (leaving it cannot free that much). Reads one counter.
    """
    budget = found.found.budget
    table = state["by_name"].get(budget.name)
    if budget.window_seconds is None or table is None:
        return None
    counter = table["values"].get(found.found.per_value or NO_VALUE)
    if counter is None:
        return None
    cutoff, left = format_ts(found.period_start), 0
    for ts, spent in counter["items"]:
        if ts <= cutoff:
            continue  # already out of the window at the figures' time
        left += spent
        if left >= micros:
            return parse_ts(ts) + dt.timedelta(seconds=budget.window_seconds)
    return None


class BudgetCheck(NamedTuple):
    """An applicable budget as the gate checks it: a cap's scope and its warn threshold."""

    figures: BudgetFigures
    scope: ScopeState
    warn_pct: Fraction
    # The period's start and end as the chain writes times (sealed and shown alike).
    period_texts: tuple[str, str]


def budget_checks(
    state: dict[str, Any] | None,
    budgets: Sequence[Budget],
    call: CallScope,
    now: dt.datetime,
    zone: dt.tzinfo,
    default_warn_pct: Fraction,
) -> list[BudgetCheck]:
    """Every budget that applies to ``call``, with its figures at ``now``.

    The scopes carry no billing reading and no reconcile: the bill has no
    per-agent view, so the uncertainty rows stay with the caps.
    """
    checks = []
    now_text = format_ts(now)
    periods = PeriodsAt(now, zone, now_text)
    for found in budget_index(budgets).applicable(call):
        start, end, start_text, end_text = periods.bounds(found.budget)
        seen = (
            _figures(state, found, periods, now_text)
            if state is not None
            else BudgetFigures(found, start, end, 0, 0, None)
        )
        # In field order (key, cap, local, billing, reserved, last spend, reading,
        # reconcile blocking, drift): built for every budget of every verdict.
        scope = ScopeState(
            found.scope_key, found.cap_micros, max(seen.used_micros, 0), None,
            seen.reserved_micros, seen.last_spend_ts, None, False, None,
        )  # fmt: skip
        warn = found.budget.warn_pct if found.budget.warn_pct is not None else default_warn_pct
        checks.append(BudgetCheck(seen, scope, warn, (start_text, end_text)))
    return checks
