"""The derived index's rows: their keys, how each part is MAC'd, what a bad one raises.

Shared by the reads (``ledger.edges.files.indexdb``) and the writes
(``ledger.edges.files.indextx``) of ``state/index.sqlite3``.
"""

import json
import sqlite3
from collections.abc import Callable
from typing import Any, NamedTuple

from ledger.errors import StateMismatchError

HEAD = b""
# Each table's value columns, after ``k`` and ``next``.
COLUMNS = {
    "keys": ("ts", "record"),
    "cold_keys": ("offset",),
    "refs": ("segment", "entry", "offset"),
    "counters": ("seq", "counter", "prior_seq", "prior"),
}
HASH_BYTES = 32
TAG_BYTES = 8
SEGMENT_BYTES = 4
ENTRY_BYTES = 8
EPOCH_DIGITS = 16


class Position(NamedTuple):
    """Where an entry is: its segment (0 until segments), line from 1, byte offset if known."""

    segment: int
    entry: int
    offset: int | None


class RefMatch(NamedTuple):
    """An entry whose hash begins with a looked-up prefix."""

    entry_hash: str
    position: Position


def json_text(value: Any) -> str:
    """Canonical JSON text of a row's value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def counter_key(budget: str, epoch: int, value: str = "") -> bytes:
    """A counter's key: its budget (length first), its epoch, its value (``""``: the prefix)."""
    return f"{len(budget):02x}{budget}{epoch:0{EPOCH_DIGITS}x}{value}".encode()


def cold_key(tag: int, segment: int = 0, entry: int = 0) -> bytes:
    """A cold key's row key: its tag, then the position of the entry it names."""
    return (
        (tag % (1 << 64)).to_bytes(TAG_BYTES, "big")
        + segment.to_bytes(SEGMENT_BYTES, "big")
        + entry.to_bytes(ENTRY_BYTES, "big")
    )


def mac_part(part: object) -> str:
    """One part of a MAC'd row, its kind first, so ``None``, ``""`` and ``0`` all differ."""
    if part is None:
        return "n"
    if isinstance(part, bytes):
        return "b" + part.hex()
    if isinstance(part, int):
        return f"i{part}"
    return f"s{part}"


def damaged(table: str, why: str) -> StateMismatchError:
    """The error for a row of ``table`` that is not as written."""
    return StateMismatchError(f"a derived index row ({table}) {why}")


class CountersBehindError(StateMismatchError):
    """The counters were saved past the state that asks, further than they can answer for."""


def counter_at(budget: str, value: str, row: tuple[Any, ...], seq: int) -> Any:
    """A counter row's value as the save ``seq`` knows it (``None``: no counter).

    Raises:
        CountersBehindError: the row no longer knows that save.
    """
    row_seq, counter, prior_seq, prior = row
    if row_seq <= seq:
        text = counter
    elif prior_seq <= seq:
        text = prior
    else:
        raise CountersBehindError(f"counter {budget}/{value} no longer knows save {seq}")
    return None if text is None else json.loads(text)


def read_meta(check: Callable[..., None], db: sqlite3.Connection) -> tuple[int, int]:
    """``(seq, floor)`` from the meta rows, each checked with ``check``."""
    found = {}
    for name, value, mac in db.execute("SELECT name, value, mac FROM meta"):
        check(mac, "meta", name, value)
        found[name] = int(value)
    return found.get("seq", 0), found.get("floor", 0)


HEAD_VALUES: dict[str, tuple[Any, ...]] = {
    "keys": ("", ""),
    "cold_keys": (None,),
    "refs": (0, 0, None),
    "counters": (0, None, 0, None),
}
