"""Spend rolled up per quarter hour and call dimensions, and grouped into report rows.

A recorded call (``budget.record_call``) and a halted verdict each add to one
cell: the quarter hour (UTC) they were sealed in and the call's own
dimensions — agent, session (``cycle_id``), gateway key, tags, model,
provider and client. A quarter hour is the coarsest slot every reporting zone
in use today starts its days on, so the same cells answer a report in any of
them; cells are summed into budget days of the zone asked for when a report
is drawn (``group``).

Every figure is an integer (micro-USD and token counts), so sums are exact.
"""

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

SLOT_SECONDS = 900
DIMENSIONS = ("agent", "session", "key", "tag", "model", "provider", "client")
# The stored dimensions: ``tags`` holds every tag of a call (a JSON list), and
# the ``tag`` dimension counts a call under each of them.
CELL_DIMENSIONS = ("agent", "session", "key", "tags", "model", "provider", "client")
MEASURES = (
    "calls",
    "usd_micros",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "halts",
)
_HALTS = frozenset({"budget.halt_100", "budget.halt_uncertainty"})
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

CellKey = tuple[int, str, str, str, str, str, str, str]
"""A cell: its slot, then ``CELL_DIMENSIONS`` ("" for none)."""


def usd6(micros: int) -> str:
    """Micro-USD as decimal USD with 6 places, as spreadsheets and cost tools read it."""
    whole, fraction = divmod(abs(micros), 1_000_000)
    return f"{'-' if micros < 0 else ''}{whole}.{fraction:06d}"


def slot_of(moment: dt.datetime) -> int:
    """The quarter hour ``moment`` falls in, counted from the Unix epoch."""
    return int((moment - _EPOCH).total_seconds() // SLOT_SECONDS)


def slot_start(slot: int) -> dt.datetime:
    """When the quarter hour ``slot`` begins (UTC)."""
    return _EPOCH + dt.timedelta(seconds=slot * SLOT_SECONDS)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _tags(value: object) -> str:
    if not isinstance(value, list):
        return "[]"
    tags = sorted({tag for tag in value if isinstance(tag, str) and tag})
    return json.dumps(tags, separators=(",", ":"))


def token_counts(payload: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """A record's (uncached input, output, cache read, cache write) tokens.

    ``tokens`` by kind when the record has them, else its ``input_tokens`` and
    ``output_tokens``; cache writes are the 5-minute and 1-hour writes together.
    """
    tokens = payload.get("tokens")
    if isinstance(tokens, dict):
        return (
            _count(tokens.get("input")),
            _count(tokens.get("output")),
            _count(tokens.get("cache_read")),
            _count(tokens.get("cache_write_5m")) + _count(tokens.get("cache_write_1h")),
        )
    return _count(payload.get("input_tokens")), _count(payload.get("output_tokens")), 0, 0


def cell_of(
    event_type: str, moment: dt.datetime, payload: Mapping[str, Any]
) -> tuple[CellKey, tuple[int, ...]] | None:
    """The cell a sealed entry adds to and what it adds (``MEASURES``), or ``None``.

    ``payload`` is a record's folded payload (loa's records already in this
    product's shape) or a verdict's. A record whose price is unknown counts as
    a call of $0 here: the gate halts on it until it is priced.
    """
    if event_type == "budget.record_call":
        model = payload.get("model_id")
        amount = payload.get("actual_micros")
        usd = amount if isinstance(amount, int) and not isinstance(amount, bool) else 0
        measures: tuple[int, ...] = (1, usd, *token_counts(payload), 0)
    elif event_type in _HALTS:
        model = payload.get("model")
        measures = (0, 0, 0, 0, 0, 0, 1)
    else:
        return None
    key: CellKey = (
        slot_of(moment),
        _text(payload.get("agent")),
        _text(payload.get("cycle_id")),
        _text(payload.get("key")),
        _tags(payload.get("tags")),
        _text(model),
        _text(payload.get("provider")),
        _text(payload.get("client")),
    )
    return key, measures


def add(cells: dict[CellKey, list[int]], key: CellKey, measures: Iterable[int]) -> None:
    """Add ``measures`` to the cell ``key``."""
    found = cells.get(key)
    if found is None:
        cells[key] = list(measures)
    else:
        for index, value in enumerate(measures):
            found[index] += value


@dataclass(frozen=True, slots=True)
class SpendRow:
    """One group on one budget day (money in micro-USD)."""

    day: str
    values: tuple[str, ...]
    calls: int
    usd_micros: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    halts: int

    def to_document(self, by: tuple[str, ...]) -> dict[str, Any]:
        """The JSON form: the day, each dimension by name, the measures."""
        return {
            "day": self.day,
            **dict(zip(by, self.values, strict=True)),
            "calls": self.calls,
            "usd_micros": self.usd_micros,
            "usd": usd6(self.usd_micros),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "halts": self.halts,
        }


def slot_range(first_day: str, last_day: str, zone: dt.tzinfo) -> tuple[int, int]:
    """The slots from ``first_day``'s midnight to the midnight after ``last_day`` in ``zone``.

    Raises:
        ValueError: a day is not ``YYYY-MM-DD``, or the zone's midnight is not on
            a quarter hour (no zone in use today; some historic offsets).
    """
    from ledger.core.timefmt import day_bounds

    start = day_bounds(first_day, zone)[0]
    end = day_bounds(last_day, zone)[1]
    for moment in (start, end):
        if (moment - _EPOCH).total_seconds() % SLOT_SECONDS:
            raise ValueError(f"midnight in this zone is not on a quarter hour ({moment})")
    return slot_of(start), slot_of(end)


def _matches(cell: Mapping[str, str], filters: Mapping[str, str]) -> bool:
    # Globs, as a budget's ``match`` reads them; "" matches a call without a value.
    for name, wanted in filters.items():
        if name == "tag":
            tags = json.loads(cell["tags"]) or [""]
            if not any(fnmatchcase(tag, wanted) for tag in tags):
                return False
        elif not fnmatchcase(cell[name], wanted):
            return False
    return True


def group(
    cells: Iterable[tuple[CellKey, Sequence[int]]],
    by: tuple[str, ...],
    zone: dt.tzinfo,
    filters: Mapping[str, str] | None = None,
) -> list[SpendRow]:
    """The cells summed per budget day (in ``zone``) and the values of ``by``, sorted.

    Grouping by ``tag`` counts a call under each of its tags (none: ""), so a
    total by tag may exceed the total. ``filters`` keeps only the cells whose
    dimension matches the glob given (``tag``: a call that carries a matching tag).
    """
    days: dict[int, str] = {}
    sums: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    for key, measures in cells:
        slot = key[0]
        named = dict(zip(CELL_DIMENSIONS, key[1:], strict=True))
        if filters and not _matches(named, filters):
            continue
        day = days.get(slot)
        if day is None:
            day = days[slot] = slot_start(slot).astimezone(zone).date().isoformat()
        choices: list[list[str]] = []
        for name in by:
            if name == "tag":
                choices.append(json.loads(named["tags"]) or [""])
            else:
                choices.append([named[name]])
        for values in _product(choices):
            found = sums.setdefault((day, values), [0] * len(MEASURES))
            for index, value in enumerate(measures):
                found[index] += value
    return [SpendRow(day, values, *figures) for (day, values), figures in sorted(sums.items())]


def _product(choices: list[list[str]]) -> list[tuple[str, ...]]:
    combos: list[tuple[str, ...]] = [()]
    for options in choices:
        combos = [(*combo, option) for combo in combos for option in options]
    return combos


def totals(rows: Iterable[SpendRow]) -> dict[str, int]:
    """The rows' measures summed (by tag: each tagged call once per tag)."""
    out = dict.fromkeys(MEASURES, 0)
    for row in rows:
        for name in MEASURES:
            out[name] += getattr(row, name)
    return out
