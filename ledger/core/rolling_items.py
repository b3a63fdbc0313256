"""A rolling window's spend as a bounded list of items, exact to the minute at its edges.

A rolling counter keeps ``[ts, micros]`` items in time order: the spend of
the records of one group, at the time of the latest of them. The groups are
the minutes of the last hour before the fold (the time of the entry being
folded) and, further back, slots of ``coarse_minutes(window)`` minutes aligned
on the Unix epoch. So a window holds at most 61 + 242 items however busy and
however long (a week, a month); spend leaves the window when the latest record
of its group does: a lone record exactly, records of one minute within the
minute, older records within their slot (a 5-hour window: a minute; a week:
42 minutes) — late, never early.

The grouping depends only on the records and the fold's time, never on the
order saves happened in: a group is merged before any of it may leave the
window (a slot is wider than a minute only for windows of more than an hour,
longer than the last hour that is kept per minute).
"""

import bisect
import datetime as dt
import functools
from typing import Any

FINE_MINUTES = 60
MAX_COARSE_ITEMS = 240
_MINUTE_TEXT = 16  # "YYYY-MM-DDTHH:MM"


def coarse_minutes(window_seconds: int) -> int:
    """The width of a slot older than the last hour: a window holds at most 240 of them."""
    return max(1, -(-window_seconds // (60 * MAX_COARSE_ITEMS)))


@functools.lru_cache(maxsize=8192)
def minute_of(text: str) -> int:
    """Minutes since the Unix epoch of a chain time (its first 16 characters)."""
    moment = dt.datetime.fromisoformat(text[:_MINUTE_TEXT]).replace(tzinfo=dt.UTC)
    return int(moment.timestamp()) // 60


def group_of(ts: str, fold_minute: int, width: int) -> tuple[bool, int]:
    """The group a record sealed at ``ts`` belongs to when folded at ``fold_minute``."""
    minute = minute_of(ts)
    if minute < fold_minute - FINE_MINUTES:
        return True, minute // width
    return False, minute


def _minute_key(item: list[Any]) -> int:
    return minute_of(item[0])


def settle(counter: dict[str, Any], fold_minute: int, width: int) -> None:
    """Merge the items that left the last hour since the counter was last settled."""
    horizon = fold_minute - FINE_MINUTES
    settled = int(counter.get("coarse", 0))
    if settled >= horizon:
        return
    items: list[list[Any]] = counter["items"]
    start = max(0, bisect.bisect_left(items, settled, key=_minute_key) - 1)
    end = bisect.bisect_left(items, horizon, key=_minute_key)
    if end - start > 1:
        merged: list[list[Any]] = []
        for item in items[start:end]:
            if merged and minute_of(merged[-1][0]) // width == minute_of(item[0]) // width:
                merged[-1] = [item[0], merged[-1][1] + item[1]]  # the later time stands
            else:
                merged.append(list(item))
        items[start:end] = merged
    counter["coarse"] = horizon


def add_item(counter: dict[str, Any], ts: str, micros: int, fold_minute: int, width: int) -> None:
    """Count ``micros`` sealed at ``ts`` in its group (a later price may be for an older record)."""
    fold_minute = max(fold_minute, minute_of(ts))
    settle(counter, fold_minute, width)
    items: list[list[Any]] = counter["items"]
    group = group_of(ts, fold_minute, width)
    at = len(items) if not items or ts >= items[-1][0] else bisect.bisect_right(items, [ts])
    if at > 0 and group_of(items[at - 1][0], fold_minute, width) == group:
        items[at - 1] = [max(ts, items[at - 1][0]), items[at - 1][1] + micros]
    elif at < len(items) and group_of(items[at][0], fold_minute, width) == group:
        items[at] = [items[at][0], items[at][1] + micros]  # its later record's time stands
    else:
        items.insert(at, [ts, micros])
