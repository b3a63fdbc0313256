"""Derived state: a fold of every verified chain entry, in chain order.

The state is a cache, never a source of truth: it can always be rebuilt from
``events.jsonl`` alone, and it is stored with the hash and size of the chain head
it reflects so that a stale or edited copy is noticed (SPEC §4 row 1).
"""

import datetime as dt
from collections.abc import Sequence
from typing import Any

from ledger.core.agents import AGENT_EVENT_PREFIXES, apply_agent_event, empty_agents_state
from ledger.core.budget_state import apply_budget_event, apply_budget_prices, empty_budget_state
from ledger.core.budgets import Budget
from ledger.core.day_counts import KEY as DAY_COUNTS
from ledger.core.day_counts import count_entry as count_day
from ledger.core.envelope import ParsedEntry
from ledger.core.foldable import IGNORED, Foldable, SchemaFor, check_entry
from ledger.core.sealed_config import CONFIG_CHANGED, fold_config_changed
from ledger.core.spend import apply_priced, apply_usd_event, empty_usd_state, negative_amount
from ledger.core.timefmt import parse_ts

STATE_FORMAT = "ledger-state/1"
OPERATOR_RESETS = frozenset({"ledger.state_rebuilt", "ledger.recovered"})
CHAIN_FINDING = "chain.finding"
SNAPSHOT_EVENT = "ledger.snapshot"
FINDING_KEY = "broken"
"""Where ``meta`` keeps a BROKEN finding; only ``ledger.recovered`` clears it."""


def empty_state(budgets: Sequence[Budget] = ()) -> dict[str, Any]:
    """The state of an empty chain, its budgets' counters keyed by ``budgets``."""
    return {
        "meta": {
            "entries": 0,
            "last_ts": None,
            "max_backstep_us": 0,
            "negative": None,
            "unfoldable": None,
            # The newest ``ledger.snapshot`` entry's time and today's verdicts
            # (``ledger metrics``; ``ledger.core.day_counts``).
            "snapshot_ts": None,
            DAY_COUNTS: None,
        },
        "usd": empty_usd_state(),
        "agents": empty_agents_state(),
        "budgets": empty_budget_state(budgets),
    }


def apply_entry(
    state: dict[str, Any],
    event_type: str,
    ts_utc: str,
    payload: dict[str, Any],
    entry_hash: str,
    zone: dt.tzinfo = dt.UTC,
    budgets: Sequence[Budget] = (),
) -> None:
    """Fold one entry into ``state`` (in place), budget days taken in ``zone``.

    ``budgets`` are the definitions the state's budget counters are kept for
    (the state remembers their fingerprint; see ``core.budget_state``).

    Records, for the gate, how far any timestamp stepped back from the entry
    before it and whether any amount was negative: both make the counter
    untrustworthy (``counter_inconsistent``).
    """
    meta = _count_entry(state, ts_utc)
    count_day(meta, event_type, ts_utc, payload, zone)
    if meta["negative"] is None:
        meta["negative"] = negative_amount(event_type, payload)
    if event_type in OPERATOR_RESETS:
        # The operator has looked at the chain (recover, rebuild-state): what was
        # flagged before this point no longer halts the gate. An entry that
        # could not be folded is not cleared: only `recover` removes it.
        meta["max_backstep_us"] = 0
        meta["negative"] = None
        priced = payload.get("priced")
        if isinstance(priced, list):
            apply_priced(state["usd"], priced)
            if budgets and "budgets" in state:
                apply_budget_prices(state["budgets"], budgets, priced)
    if event_type == CHAIN_FINDING:
        # Sealed in the chain, the finding is folded back by any state, however
        # old, that folds the chain up to its head: it cannot be hidden by
        # putting back an older derived state.
        meta[FINDING_KEY] = {"line": payload.get("line"), "reason": payload.get("reason")}
    elif event_type == "ledger.recovered":
        meta.pop(FINDING_KEY, None)
    elif event_type == CONFIG_CHANGED:
        fold_config_changed(meta, payload)
    elif event_type == SNAPSHOT_EVENT:
        meta["snapshot_ts"] = ts_utc
    family = event_type.split(".", 1)[0]
    if family == "budget":
        apply_usd_event(state["usd"], event_type, ts_utc, payload, entry_hash, zone)
        if budgets:
            budget_state = state.setdefault("budgets", empty_budget_state(budgets))
            apply_budget_event(budget_state, budgets, event_type, ts_utc, payload, entry_hash, zone)
    elif family in AGENT_EVENT_PREFIXES:
        apply_agent_event(state["agents"], event_type, ts_utc, payload, entry_hash)


def _count_entry(state: dict[str, Any], ts_utc: str) -> dict[str, Any]:
    """Count one entry and note how far its time stepped back; returns the meta table."""
    meta: dict[str, Any] = state["meta"]
    meta["entries"] += 1
    last = meta["last_ts"]
    if last is not None and ts_utc < last:
        step = parse_ts(last) - parse_ts(ts_utc)
        backstep = step.days * 86_400_000_000 + step.seconds * 1_000_000 + step.microseconds
        meta["max_backstep_us"] = max(meta["max_backstep_us"], backstep)
    if last is None or ts_utc > last:
        meta["last_ts"] = ts_utc
    return meta


def fold_verified(
    state: dict[str, Any],
    event_type: str,
    ts_utc: str,
    payload: Any,
    entry_hash: str,
    schema_for: SchemaFor,
    zone: dt.tzinfo = dt.UTC,
    budgets: Sequence[Budget] = (),
) -> None:
    """Fold an entry read from the chain (verified, but written by anyone holding a key).

    Never raises: an entry of our namespaces that cannot be folded is counted,
    not folded, and recorded in ``meta.unfoldable`` (the first one, by line),
    which halts the gate until ``recover`` removes it (SPEC §5).
    """
    errors = (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError)
    try:
        checked = check_entry(event_type, ts_utc, payload, schema_for)
    except errors as exc:
        checked = f"payload unreadable ({type(exc).__name__})"
    if isinstance(checked, Foldable):
        try:
            apply_entry(state, event_type, ts_utc, checked.payload, entry_hash, zone, budgets)
        except errors as exc:
            # Checked, yet the fold failed (apply_entry counted it first): a halt,
            # never a crash.
            meta = state["meta"]
            problem = f"cannot be folded ({type(exc).__name__})"
        else:
            return
    else:
        meta = _count_entry(state, ts_utc)
        problem = checked
    if problem != IGNORED and meta.get("unfoldable") is None:
        meta["unfoldable"] = f"line {meta['entries']}: {event_type}: {problem}"


def unfoldable_problem(state: dict[str, Any]) -> str | None:
    """Why the counter cannot be trusted because of an entry it could not fold."""
    found = state["meta"].get("unfoldable")
    if not found:
        return None
    return (
        f"verified entry cannot be folded: {found}; revoke the key that signed it from its "
        "time (`ledger keys revoke KEY --at TS`) and run `ledger recover`"
    )


IDEMPOTENT_EVENTS = frozenset({"budget.record_call", "tokens.record"})


def idempotency_record(
    event_type: str, payload: dict[str, Any], entry_hash: str, number: int
) -> dict[str, Any] | None:
    """What the key index keeps for an entry sealed with an idempotency key, or ``None``.

    ``number`` is the entry's position in the chain (from 1): a later command
    that finds the key holds the record against the chain it sees.
    """
    if event_type not in IDEMPOTENT_EVENTS:
        return None
    key = payload.get("idempotency_key")
    if not isinstance(key, str) or not key:
        return None
    return {
        "key": key,
        "entry_hash": entry_hash,
        "event_type": event_type,
        "entry": number,
        "payload": payload,
    }


def apply_parsed(
    state: dict[str, Any],
    parsed: ParsedEntry,
    schema_for: SchemaFor,
    zone: dt.tzinfo = dt.UTC,
    budgets: Sequence[Budget] = (),
) -> None:
    """Fold a verified chain entry (checked first, see ``fold_verified``)."""
    fold_verified(
        state, parsed.event_type, parsed.ts_utc, parsed.payload, parsed.entry_hash, schema_for,
        zone, budgets,
    )  # fmt: skip
