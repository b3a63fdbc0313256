"""A stored state's budgets recounted for new definitions, each budget on its own (SPEC §21).

A record counts on a budget by what its call was known by, whatever else is
defined (``core.budget_state``), so each budget's counters are a fold of
their own, and a change of ``[[budgets]]`` recounts only the budgets it
changed:

- a budget whose name, period, ``match`` and ``per`` are as they were keeps
  its counters (a raised cap, a new threshold, ``usd_for``: nothing is
  counted);
- a calendar budget that is new or changed is counted from the budget facts
  the rollups keep (``core.budget_facts``): cells of a quarter hour, read in
  O(cells of its period), not the entries;
- a rolling window, or a budget the facts cannot count exactly, is folded
  from the chain over its current period (``budget_refold``).

The parts are put together as one budgets' state: the kept, counted and
folded counters, with each open reservation and unpriced record holding the
counts of every budget it is held on.
"""

import copy
import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ledger.core.budget_facts import Counted, counted, first_slot
from ledger.core.budget_state import empty_budget_state
from ledger.core.budgets import Budget, counting_key
from ledger.core.timefmt import parse_ts
from ledger.services.chain import budget_refold
from ledger.services.chain.schema_lookup import schema_lookup

if TYPE_CHECKING:
    from ledger.core.budget_facts import Cell, CellKey, Pending
    from ledger.services.ports import CounterDeps, StoredStateLike


class _Restated:
    """A stored state with its budgets counted afresh."""

    def __init__(self, head_hash: str | None, size: int, data: dict[str, Any]) -> None:
        self.head_hash = head_hash
        self.size = size
        self.data = data


def restated(
    stored: "StoredStateLike", deps: "CounterDeps", budgets: tuple[Budget, ...], zone: dt.tzinfo
) -> tuple["StoredStateLike | None", int | None]:
    """The stored state with its budgets counted for ``budgets``, and the entries folded.

    ``(None, None)`` when that fails: the whole state is rebuilt and verified then.

    Raises:
        ChainIOError: the chain cannot be read.
    """
    config = deps.config
    old: dict[str, Any] = stored.data.get("budgets") or {}
    defs = old.get("defs")
    if not isinstance(defs, dict):
        defs = {}  # kept before each budget's definition was: everything is counted
    kept = {b.name for b in budgets if defs.get(b.name) == counting_key(b)}
    changed = [b for b in budgets if b.name not in kept]
    from_facts = _from_facts(stored, deps, changed, zone)
    rest = tuple(b for b in changed if b.name not in from_facts)
    folded_part, folded = empty_budget_state(), 0
    if rest:
        margin = dt.timedelta(
            seconds=2 * config.reservation_ttl_seconds + config.clock_tolerance_seconds + 1
        )
        refold = budget_refold.refold_budgets(
            deps.chain, stored.data, stored.size, rest, zone, margin, schema_lookup(deps)
        )
        if refold is None:
            return None, None
        folded_part, folded = refold
    data = copy.deepcopy({k: v for k, v in stored.data.items() if k != "budgets"})
    data["budgets"] = _merged(old, kept, folded_part, from_facts, budgets)
    return _Restated(stored.head_hash, stored.size, data), folded


def _from_facts(
    stored: "StoredStateLike", deps: "CounterDeps", changed: list[Budget], zone: dt.tzinfo
) -> dict[str, Counted]:
    """The changed calendar budgets the rollups' facts count exactly, by name."""
    source = getattr(deps, "budget_facts_at", None)
    meta = stored.data.get("meta", {})
    last = meta.get("last_ts")
    calendar = [b for b in changed if b.window_seconds is None]
    if source is None or not calendar or not isinstance(last, str) or stored.head_hash is None:
        return {}
    head = parse_ts(last)
    # A record may be sealed with a time before its verdict's, by the clock's
    # step back: the cells read start that much earlier.
    step = max(
        dt.timedelta(seconds=deps.config.clock_tolerance_seconds),
        dt.timedelta(microseconds=int(meta.get("max_backstep_us") or 0)),
    )
    starts = {b.name: first_slot(b, head, zone, step) for b in calendar}
    facts = source(stored_head(stored), int(meta.get("entries", 0)), min(starts.values()))
    if facts is None:
        return {}
    found = {}
    for budget in calendar:
        since = starts[budget.name]
        cells: list[tuple[CellKey, Cell]] = [c for c in facts.cells if c[0].r_slot >= since]
        pending: list[tuple[str, Pending]] = facts.pending
        doubts = [slot for slot in facts.doubts if slot >= since]
        answer = counted(budget, head, zone, cells, pending, doubts, facts.max_ts)
        if answer is not None:
            found[budget.name] = answer
    return found


class StoredHead(NamedTuple):
    """The chain position a stored state was folded to, as a ``Head``."""

    entry_hash: str
    ts_utc: str
    size: int


def stored_head(stored: "StoredStateLike") -> StoredHead:
    """Where ``stored`` was folded to (a state with a head and a last entry's time)."""
    return StoredHead(str(stored.head_hash), str(stored.data["meta"]["last_ts"]), stored.size)


def _merged(
    old: Mapping[str, Any],
    kept: set[str],
    folded: Mapping[str, Any],
    from_facts: Mapping[str, Counted],
    budgets: tuple[Budget, ...],
) -> dict[str, Any]:
    """One budgets' state of the kept, folded and counted parts."""
    state = empty_budget_state(budgets)
    tables = old.get("by_name") or {}
    state["by_name"] = {name: tables[name] for name in kept if name in tables}
    state["by_name"].update(folded.get("by_name") or {})
    for name, answer in from_facts.items():
        state["by_name"][name] = answer.table
    opened: dict[str, dict[str, Any]] = state["open"]
    for ref, held in (old.get("open") or {}).items():
        counts = [list(count) for count in held["counts"] if count[0] in kept]
        if counts:
            opened[ref] = {"expires_at": held["expires_at"], "counts": counts}
    for ref, held in (folded.get("open") or {}).items():
        entry = opened.setdefault(ref, {"expires_at": held["expires_at"], "counts": []})
        entry["counts"] += [list(count) for count in held["counts"]]
    for answer in from_facts.values():
        for ref, expires, count in answer.opens:
            opened.setdefault(ref, {"expires_at": expires, "counts": []})["counts"].append(count)
    unpriced = {
        ref: {"ts": record["ts"], "counts": [list(c) for c in record["counts"] if c[0] in kept]}
        for ref, record in (old.get("unpriced") or {}).items()
    }
    for ref, record in (folded.get("unpriced") or {}).items():
        entry = unpriced.setdefault(ref, {"ts": record["ts"], "counts": []})
        entry["counts"] += [list(count) for count in record["counts"]]
    if unpriced:
        state["unpriced"] = unpriced
    # In the budgets' order, as a fold from line 1 lists them.
    order = {budget.name: at for at, budget in enumerate(budgets)}
    for held in [*opened.values(), *unpriced.values()]:
        held["counts"].sort(key=lambda count: order.get(count[0], len(order)))
    return state
