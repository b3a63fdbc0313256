"""Today's verdicts and records of unpriced usage, counted as the chain is folded.

``ledger metrics`` shows the budget day's verdicts by outcome and uncertainty
reason, and its records whose usage reported what has no price here. Counted
here, in the derived state, they cost nothing to read whatever the chain's
length. Only the newest budget day an entry was sealed on is kept: an entry of
a later day starts the counts afresh, and one of an earlier day (a clock that
stepped back) is not counted, as a reader counting the day's entries by their
time would not count it for the newer day either.
"""

import datetime as dt
from typing import Any

from ledger.core.timefmt import budget_day, parse_ts

KEY = "today"
VERDICT_TYPES = frozenset(
    {"budget.allow", "budget.warn_90", "budget.halt_100", "budget.halt_uncertainty"}
)
_RECORD = "budget.record_call"


def count_entry(
    meta: dict[str, Any], event_type: str, ts_utc: str, payload: dict[str, Any], zone: dt.tzinfo
) -> None:
    """Count one folded entry in ``meta[KEY]`` (in place) when it is a verdict or such a record."""
    if event_type in VERDICT_TYPES:
        unknown = None
    elif event_type == _RECORD and payload.get("unknown_usage"):
        unknown = payload["unknown_usage"]
    else:
        return
    try:
        day = budget_day(parse_ts(ts_utc), zone)
    except (ValueError, OverflowError):
        return
    today = meta.get(KEY)
    if today is None or day > today["day"]:
        today = meta[KEY] = {"day": day, "verdicts": {}, "unknown_usage": {}}
    elif day < today["day"]:
        return
    if unknown is None:
        reason = str(payload.get("uncertainty_reason") or "")
        key = f"{event_type}|{reason}"
        today["verdicts"][key] = today["verdicts"].get(key, 0) + 1
        return
    counts = today["unknown_usage"]
    for name in unknown if isinstance(unknown, list) else ():
        counts[str(name)] = counts.get(str(name), 0) + 1
