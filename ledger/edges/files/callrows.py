"""A call row as the calls table stores it: its columns, and a body without what they hold.

A call's row has some twenty fields; most of them are either null or already
held by a column the pages filter on (agent, session, key, the times, the
amount). Writing them again in the body doubled the table: about a kilobyte
a call, as much as the call's two entries in the chain. So the stored body
leaves out every field the columns give back exactly and every null field,
and names what it left out in three bit masks over ``FIELDS``: null, equal to
the row's ``ref``, held by its column. Read back, the row is the same row,
field for field, so its MAC (over the whole row) is checked as before.
"""

import json
import re
from collections.abc import Sequence
from typing import Any

# Every field a call row has (``services/views/calls``), in a fixed order: a
# mask's bit n stands for FIELDS[n]. New fields go at the end.
FIELDS = (
    "line", "time", "verdict_ref", "verdict", "deciding_cap", "provider", "model", "agent",
    "session", "key", "tags", "client", "estimated_micros", "actual_micros", "clamped_tokens",
    "uncertainty_reason", "record_ref", "record_time", "entry_hash", "input_tokens",
    "output_tokens",
)  # fmt: skip
_BIT = {name: 1 << index for index, name in enumerate(FIELDS)}
# The table's columns after ``line``, in their order (``calltable.SCHEMA``).
COLUMNS = ("ref", "time", "record_time", "agent", "session", "key", "model", "provider",
           "client", "verdict", "tags", "actual")  # fmt: skip
_TEXT_COLUMNS = ("record_time", "agent", "session", "key", "model", "provider", "client",
                 "verdict")  # fmt: skip
_NULL, _REF, _COLUMN = "~null", "~ref", "~col"
_ENTRY_HASH = re.compile(r"[0-9a-f]{64}")


def dumps(value: Any) -> str:
    """The JSON a row's MAC is taken over (and a body is written in)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def ref_column(ref: str) -> str | bytes:
    """How the ``ref`` column holds a call's ref: an entry hash as its 32 bytes.

    Half the bytes in the table and in its unique index; any other text (a
    chain this product did not write could name its calls otherwise) as it is.
    """
    return bytes.fromhex(ref) if _ENTRY_HASH.fullmatch(ref) else ref


def _ref_text(column: str | bytes) -> str:
    return column.hex() if isinstance(column, bytes) else column


def _tags_column(row: dict[str, Any]) -> str:
    """The ``tags`` column: the row's distinct tags, sorted, as JSON."""
    tags = row.get("tags")
    return dumps(sorted({t for t in tags if isinstance(t, str)} if isinstance(tags, list) else ()))


def encode(row: dict[str, Any]) -> tuple[tuple[Any, ...], str]:
    """What the table stores of ``row``: ``line`` then ``COLUMNS``, and the body beside them."""
    stored = _columns(row)
    return stored, _body_of(row, dict(zip(("line", *COLUMNS), stored, strict=True)))


def _columns(row: dict[str, Any]) -> tuple[Any, ...]:
    """``line`` then ``COLUMNS`` of ``row`` ("" for a call without a value)."""
    amount = row.get("actual_micros")
    return (
        int(row["line"]), ref_column(str(row["verdict_ref"])), str(row["time"]),
        *(_text(row.get(name)) for name in _TEXT_COLUMNS), _tags_column(row),
        amount if type(amount) is int else 0,
    )  # fmt: skip


def _held_by_column(name: str, value: Any, stored: dict[str, Any]) -> bool:
    if name in ("line", "actual_micros"):
        return type(value) is int
    if name in ("time", "verdict_ref"):
        return type(value) is str
    if name == "tags":
        return type(value) is list and dumps(value) == stored["tags"]
    return name in _TEXT_COLUMNS and type(value) is str and value != ""


def _body_of(row: dict[str, Any], stored: dict[str, Any]) -> str:
    """The body to store beside the columns ``stored`` (by name, as ``_columns`` gives them)."""
    body: dict[str, Any] = {}
    masks = {_NULL: 0, _REF: 0, _COLUMN: 0}
    ref = _ref_text(stored["ref"])
    for name, value in row.items():
        bit = _BIT.get(name)
        if bit is None:
            body[name] = value
        elif value is None:
            masks[_NULL] |= bit
        elif _held_by_column(name, value, stored):
            masks[_COLUMN] |= bit
        elif name != "verdict_ref" and value == ref:
            masks[_REF] |= bit
        else:
            body[name] = value
    body.update((mask, bits) for mask, bits in masks.items() if bits)
    return dumps(body)


def row_of(stored: Sequence[Any], body: str) -> dict[str, Any]:
    """The row a stored ``line``, ``COLUMNS`` and body were written from."""
    named = dict(zip(("line", *COLUMNS), stored, strict=True))
    named["ref"] = _ref_text(named["ref"])
    from_column = {
        "line": named["line"], "time": named["time"], "verdict_ref": named["ref"],
        "actual_micros": named["actual"], "tags": json.loads(named["tags"]),
        **{name: named[name] for name in _TEXT_COLUMNS},
    }  # fmt: skip
    kept: dict[str, Any] = json.loads(body)
    nulls, refs, held = (int(kept.pop(mask, 0)) for mask in (_NULL, _REF, _COLUMN))
    row: dict[str, Any] = {}
    for name, bit in _BIT.items():
        if nulls & bit:
            row[name] = None
        elif refs & bit:
            row[name] = named["ref"]
        elif held & bit:
            row[name] = from_column[name]
    row.update(kept)
    return row
