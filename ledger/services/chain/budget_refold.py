"""New budget definitions counted from their current periods, not from line 1.

When ``[[budgets]]`` change, the counters kept for the old definitions cannot
be trusted for the new ones, but everything else in the derived state can: it
was folded from the verified chain up to its head, and budgets change nothing
in it. So only the budgets' part is counted afresh, and only over the entries
it can depend on: from the earliest start of any budget's current period at
the state's head (a rolling window's start; a budget that never resets starts
at line 1), and never after an open reservation's verdict (a record settling
it counts where its verdict was admitted). The entries there are found by
bisecting the chain on ``ts_utc`` (a chain this product wrote never goes back in
time by more than the clock tolerance) and folded without checking their
signatures again: the stored state, integrity-checked, vouches for the prefix
it was folded from.

The margin before that start is the reservation time-to-live twice over plus
the clock tolerance: a verdict admitted before it either expired before the
period began or is an open reservation, which pulls the start earlier.
"""

import datetime as dt
from collections.abc import Sequence
from typing import Any

from ledger.core.budget_calendar import period_bounds
from ledger.core.budget_state import apply_budget_event, apply_budget_prices, empty_budget_state
from ledger.core.budgets import Budget
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.foldable import Foldable, SchemaFor, check_entry
from ledger.core.state import OPERATOR_RESETS
from ledger.core.timefmt import format_ts, parse_ts
from ledger.services.chain.chain_time import bisect_time
from ledger.services.ports import ChainStore


def refold_budgets(
    store: ChainStore,
    data: dict[str, Any],
    size: int,
    budgets: tuple[Budget, ...],
    zone: dt.tzinfo,
    margin: dt.timedelta,
    schema_for: SchemaFor,
) -> tuple[dict[str, Any], int] | None:
    """The budgets' state for ``budgets`` at the stored state's head, and entries folded.

    ``data`` is the stored state (folded up to byte ``size``); each entry is
    checked as the full fold checks it (``schema_for``). ``None`` when a line
    there does not parse or check (then the whole state is rebuilt and verified).

    Raises:
        ChainIOError: the chain cannot be read.
    """
    state = empty_budget_state(budgets)
    last = data.get("meta", {}).get("last_ts")
    if not budgets or not isinstance(last, str):
        return state, 0
    since = _since(data, budgets, parse_ts(last), zone, margin)
    start = bisect_time(store, size, format_ts(since)) if since is not None else 0
    folded = 0
    lines = store.iter_lines(start, size)
    if start > 0:
        next(lines, None)  # the rest of the line the bisection landed in
    for raw in lines:
        if raw.startswith(b"["):
            continue
        try:
            parsed = parse_line(raw.rstrip(b"\n"))
        except EnvelopeFormatError:
            return None
        folded += 1
        try:
            checked = check_entry(parsed.event_type, parsed.ts_utc, parsed.payload, schema_for)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError):
            return None
        if not isinstance(checked, Foldable):
            continue  # ignored as the full fold ignores it (one it cannot fold halts it)
        payload = checked.payload
        if parsed.event_type in OPERATOR_RESETS and isinstance(payload.get("priced"), list):
            apply_budget_prices(state, budgets, payload["priced"])
        apply_budget_event(
            state, budgets, parsed.event_type, parsed.ts_utc, payload, parsed.entry_hash, zone
        )
    return state, folded


def _since(
    data: dict[str, Any],
    budgets: Sequence[Budget],
    head_moment: dt.datetime,
    zone: dt.tzinfo,
    margin: dt.timedelta,
) -> dt.datetime | None:
    """The earliest moment the budgets' counters at the head depend on; ``None``: line 1."""
    starts = []
    for budget in budgets:
        try:
            starts.append(period_bounds(budget, head_moment, zone)[0])
        except (OverflowError, ValueError):
            return None  # a period that starts before the calendar does: from line 1
    reservations = data.get("usd", {}).get("reservations", {})
    for reservation in reservations.values():
        expires = reservation.get("expires_at") if isinstance(reservation, dict) else None
        if not isinstance(expires, str):
            return None
        starts.append(parse_ts(expires))
    try:
        return min(starts) - margin
    except OverflowError:
        return None
