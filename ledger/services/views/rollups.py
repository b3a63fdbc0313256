"""Spend per budget day and dimension, from the rollups kept beside the chain (SPEC §19).

The rollups are derived state: cells of a quarter hour and a call's
dimensions (``ledger.core.rollups``), saved with the chain position they
reflect. Each read first catches them up by verifying and folding the entries
after that position, so a report costs O(new entries) + O(days × groups),
never a read of the chain from line 1; the newest checkpoint in the home is
held against them as the gate holds its counter. Rollups that fail their
integrity check (an edited row, an unreadable file) are dropped and rebuilt
from the verified chain, with a note for the caller; rollups whose position
the chain no longer has (the chain was changed or recovered) are rebuilt too.

``spend`` is the one entry point for readers (``ledger report``, the console's
Spend page); ``rebuild`` is ``ledger rebuild-state``'s part.
"""

import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ledger.core.rollups import (
    DIMENSIONS,
    CellKey,
    SpendRow,
    group,
    slot_of,
    totals,
)
from ledger.core.rollups import slot_range as _slot_range
from ledger.core.trust import trust_fingerprint
from ledger.errors import ChainBrokenError, LedgerError, StateMismatchError, UsageError
from ledger.services.chain.schema_lookup import schema_lookup
from ledger.services.ports import Head
from ledger.services.views.rollup_fold import Fold, fold_range
from ledger.services.views.rollup_ports import RollupDeps, RollupTx

if TYPE_CHECKING:
    from ledger.core.trust import TrustStore

T = TypeVar("T")
_LAST_SLOT = 2**40  # beyond any time a chain holds
# A catch-up of more lines than this commits every this many: a first fold of
# a long chain (an hour at 10M entries) then keeps what it folded if it is
# stopped, and its SQLite WAL stays bounded (one transaction held gigabytes).
CHUNK_LINES = 100_000
# 2: with the calls table; 3: its rows stored without what the columns hold;
# 4: with the budget facts.
ROLLUP_FORMAT = 4


class CheckpointDisagreesError(LedgerError):
    """The chain is shorter than, or differs from, the newest checkpoint (exit 1)."""


@dataclass(slots=True)
class Caught:
    """Where the rollups stand after catching up."""

    entries: int
    head_hash: str | None
    folded: int
    rebuilt: bool
    note: str | None = None
    # The chain's byte size at ``entries`` (where a reader of the chain stops).
    size: int = 0
    # Whether the rollups reached the head (a catch-up given a limit may stop short).
    complete: bool = True


@dataclass(slots=True)
class SpendResult:
    """What ``spend`` answers: the rows and the chain position they reflect."""

    rows: list[SpendRow]
    by: tuple[str, ...]
    first_day: str
    last_day: str
    caught: Caught
    notes: list[str] = field(default_factory=list)
    # Every measure over the range, each call once (a call with two tags too).
    total: dict[str, int] = field(default_factory=dict)


def _empty(fingerprint: str) -> dict[str, Any]:
    return {
        "format": ROLLUP_FORMAT,
        "entries": 0,
        "size": 0,
        "head_hash": None,
        "last_slot": -(2**62),
        "trust": fingerprint,
        "checkpoint": None,
    }


def _usable(position: dict[str, Any] | None, fingerprint: str, head: Head | None) -> bool:
    if position is None or position.get("format") != ROLLUP_FORMAT:
        return False
    if position.get("trust") != fingerprint:
        return False  # the keys changed: everything is verified again
    size = int(position["size"])
    if head is None:
        return size == 0
    if size > head.size:
        return False
    return size < head.size or position["head_hash"] == head.entry_hash


def _hold_against_checkpoint(
    deps: RollupDeps, trust: "TrustStore", position: dict[str, Any], head: Head | None, fold: Fold
) -> None:
    from ledger.core.checkpoint import checkpoint_signature_problem

    checkpoint = deps.newest_checkpoint()
    if checkpoint is None or position.get("checkpoint") == [
        checkpoint.entries,
        checkpoint.head_hash,
    ]:
        return
    problem = checkpoint_signature_problem(checkpoint, trust)
    entries = int(position["entries"])
    if problem is None and entries < checkpoint.entries:
        problem = (
            f"chain has {entries} entries but its newest checkpoint vouches for "
            f"{checkpoint.entries} (truncated or deleted)"
        )
    if problem is None:
        if fold.checkpoint_at == checkpoint.entries and fold.checkpoint_hash is not None:
            found: str | None = fold.checkpoint_hash
        elif entries == checkpoint.entries and head is not None:
            found = head.entry_hash
        else:
            found = deps.chain.hash_of_entry(checkpoint.entries)
        if found != checkpoint.head_hash:
            problem = f"entry {checkpoint.entries} differs from the newest checkpoint's head"
    if problem is not None:
        raise CheckpointDisagreesError(
            f"the chain does not verify: {problem}; run `ledger recover`"
        )
    position["checkpoint"] = [checkpoint.entries, checkpoint.head_hash]


def catch_up_in(
    deps: RollupDeps,
    tx: RollupTx,
    *,
    fresh: bool,
    until: Head | None = None,
    limit: int | None = None,
) -> Caught:
    """Catch the rollups up to the chain head (``until``: to that head of the chain).

    With ``limit``, at most that many lines are folded: the answer's
    ``complete`` says whether the head was reached (the newest checkpoint is
    held against the rollups only then).
    """
    if until is not None:
        head: Head | None = until
    else:
        with deps.chain.read_transaction() as chain_tx:
            head = chain_tx.head()
    trust = deps.keys.load_trust()
    fingerprint = trust_fingerprint(trust)
    checkpoint = deps.newest_checkpoint()
    at = checkpoint.entries if checkpoint is not None else None
    position = None if fresh else tx.position()
    rebuilt = not _usable(position, fingerprint, head)
    if position is None or rebuilt:
        tx.clear()
        position = _empty(fingerprint)
    folded = 0
    fold = Fold(tx, schema_lookup(deps), int(position["last_slot"]), at, position.get("facts"))
    if head is not None and head.size > int(position["size"]):
        start = dict(position)
        if not fold_range(deps, trust, start, head, fold, limit) and int(start["entries"]):
            # The chain after the saved position does not link to it: the chain
            # was changed behind the rollups (recovered, restored). From line 1.
            tx.clear()
            position, rebuilt = _empty(fingerprint), True
            fold = Fold(tx, schema_lookup(deps), int(position["last_slot"]), at)
            fold_range(deps, trust, dict(position), head, fold, limit)
        if fold.broken is not None:
            raise ChainBrokenError(*fold.broken)
        folded = fold.entries - int(position["entries"])
        fold.write_calls()
        tx.add(fold.cells, fold.marks)
        position.update(
            entries=fold.entries, size=fold.size, head_hash=fold.prev, last_slot=fold.last_slot,
            facts=fold.facts_totals,
        )  # fmt: skip
    complete = head is None or int(position["size"]) >= head.size
    if complete:
        _hold_against_checkpoint(deps, trust, position, head, fold)
    tx.save_position(position)
    return Caught(
        int(position["entries"]), position["head_hash"], folded, rebuilt,
        size=int(position["size"]), complete=complete,
    )  # fmt: skip


@dataclass(slots=True)
class _Reading:
    caught: Caught
    cells: list[tuple[CellKey, tuple[int, ...]]]
    marks: list[list[Any] | None]


def with_rollups(deps: RollupDeps, query: Callable[[RollupTx], T]) -> tuple[Caught, T]:
    """Catch up, then answer ``query`` in the same transaction (what it reads is current).

    A rollup store that fails its integrity check is dropped and rebuilt once.
    """
    note = None
    for attempt in (0, 1):
        try:
            caught, answer = _in_chunks(deps, query, fresh=attempt == 1)
        except StateMismatchError as exc:
            if attempt:
                raise
            note = f"{exc}: rebuilt from the chain"
            deps.rollups.delete()
        else:
            caught.note = note
            return caught, answer
    raise AssertionError("unreachable")


def _in_chunks(
    deps: RollupDeps, query: Callable[[RollupTx], T], *, fresh: bool
) -> tuple[Caught, T]:
    """Catch up a transaction of ``CHUNK_LINES`` at a time; ``query`` in the one that ends it."""
    folded, rebuilt = 0, False
    while True:
        with deps.rollups.writing() as tx:
            caught = catch_up_in(deps, tx, fresh=fresh, limit=CHUNK_LINES)
            folded, rebuilt = folded + caught.folded, rebuilt or caught.rebuilt
            if caught.complete:
                caught.folded, caught.rebuilt = folded, rebuilt
                return caught, query(tx)
        fresh = False  # the chunk just committed is the next one's start


def _read(
    deps: RollupDeps, slots: tuple[int, int] | None, mark_slots: Sequence[int | None] = ()
) -> _Reading:
    """Catch up, then read the cells of ``slots`` (and the marks at ``mark_slots``)."""

    def query(tx: RollupTx) -> _Reading:
        cells = tx.cells(*slots) if slots is not None else []
        marks = [None if at is None else tx.mark_from(at) for at in mark_slots]
        return _Reading(Caught(0, None, 0, rebuilt=False), cells, marks)

    caught, reading = with_rollups(deps, query)
    reading.caught = caught
    return reading


def catch_up(deps: RollupDeps) -> Caught:
    """Bring the rollups up to the chain head (verifying what is new); writes nothing else.

    Raises:
        ChainBrokenError: the new entries do not verify.
        CheckpointDisagreesError: the chain is cut or differs from its newest checkpoint.
        StateMismatchError: the rollups could not be rebuilt.
        ChainIOError: the chain or the rollups cannot be read.
    """
    return _read(deps, None).caught


def rebuild(deps: RollupDeps) -> Caught:
    """Drop the rollups and fold them again from the verified chain (``rebuild-state``)."""
    deps.rollups.delete()
    caught = catch_up(deps)
    caught.rebuilt = True
    return caught


def check_dimensions(by: Sequence[str], filters: Mapping[str, str]) -> None:
    """Refuse a dimension that is not one of ``DIMENSIONS``.

    Raises:
        UsageError: an unknown or repeated dimension.
    """
    for name in [*by, *filters]:
        if name not in DIMENSIONS:
            raise UsageError(f"--by: {name!r} is not one of {', '.join(DIMENSIONS)}")
    if len(set(by)) != len(by):
        raise UsageError("--by: a dimension is given twice")


def slot_range(first_day: str, last_day: str, zone: dt.tzinfo) -> tuple[int, int]:
    """The quarter hours of the budget days ``first_day`` to ``last_day`` in ``zone``.

    Raises:
        UsageError: the range is empty or the zone's midnight is not on a quarter hour.
    """
    if last_day < first_day:
        raise UsageError(f"--to {last_day} is before --from {first_day}")
    try:
        return _slot_range(first_day, last_day, zone)
    except ValueError as exc:
        raise UsageError(f"--tz: {exc}") from None


def spend(
    deps: RollupDeps,
    start: str,
    end: str,
    by: Sequence[str] = (),
    filters: Mapping[str, str] | None = None,
    tz: dt.tzinfo | None = None,
) -> SpendResult:
    """Recorded spend per budget day and group, from the rollups (caught up first).

    Args:
        deps: the runtime (``ledger.runtime.Runtime``) or anything with its parts.
        start: the first budget day, ``YYYY-MM-DD`` (inclusive).
        end: the last budget day, ``YYYY-MM-DD`` (inclusive).
        by: dimensions to group by, outermost first: any of ``agent``,
            ``session``, ``key``, ``tag``, ``model``, ``provider``, ``client``.
        filters: keep only calls whose dimension has this value (``{"key":
            "alice"}``; ``tag``: calls carrying that tag; ``""``: calls without one).
        tz: the reporting zone (default ``usd.day_timezone``).

    Returns:
        ``SpendResult``: ``rows`` — one ``SpendRow`` per day and group, sorted,
        each with ``day``, ``values`` (in the order of ``by``; ``""`` for a call
        without one), ``calls``, ``usd_micros``, ``input_tokens`` (uncached),
        ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens`` and
        ``halts``; ``caught`` — the chain position (``entries``,
        ``head_hash``) the rows reflect; ``notes`` — anything a reader should
        be told (rollups rebuilt after failing their integrity check). A call
        with several tags counts under each when grouped by tag. A call counts
        on the budget day its record was sealed.

    Raises:
        UsageError: an unknown dimension, an empty range, an unusable zone.
        ChainBrokenError: the chain does not verify from the rollups' position.
        CheckpointDisagreesError: the chain disagrees with its newest checkpoint.
        ChainIOError: the chain or the rollups cannot be read.
    """
    by = tuple(by)
    filters = dict(filters or {})
    check_dimensions(by, filters)
    zone = tz if tz is not None else deps.config.day_zone
    slots = slot_range(start, end, zone)
    reading = _read(deps, slots)
    rows = group(reading.cells, by, zone, filters)
    total = totals(group(reading.cells, (), zone, filters))
    notes = [reading.caught.note] if reading.caught.note else []
    return SpendResult(rows, by, start, end, reading.caught, notes, total)


def mark_before(deps: RollupDeps, moment: dt.datetime) -> tuple[Caught, list[Any] | None]:
    """Catch up; the chain position before the first entry sealed at or after ``moment``.

    ``[entries, size, prev_hash]``, or ``None`` when no entry is that late.
    """
    reading = _read(deps, None, [slot_of(moment)])
    return reading.caught, reading.marks[0]


def marks_at(
    deps: RollupDeps, first_slot: int | None, end_slot: int
) -> tuple[Caught, list[Any] | None, list[Any] | None]:
    """Catch up; the marks before the first entries at or after ``first_slot`` and ``end_slot``.

    Each ``[entries, size, prev_hash]``, or ``None`` when no entry is that late
    (``first_slot`` ``None``: not asked).
    """
    reading = _read(deps, None, [first_slot, end_slot])
    return reading.caught, reading.marks[0], reading.marks[1]


def iter_from(deps: RollupDeps, mark: list[Any], end: int) -> Iterator[bytes]:
    """The chain's lines from a mark's byte offset to ``end``."""
    return deps.chain.iter_lines(int(mark[1]), end)


def cells_between(
    deps: RollupDeps, start: dt.datetime, end: dt.datetime | None
) -> tuple[Caught, list[tuple[CellKey, tuple[int, ...]]]]:
    """Catch up; the cells of the quarter hours from ``start``'s to ``end``'s (``None``: all).

    Both ends are taken to their quarter hour: a caller that needs the exact
    second reads the calls table instead.
    """
    first = slot_of(start)
    last = slot_of(end) if end is not None else _LAST_SLOT
    reading = _read(deps, (first, max(first, last)))
    return reading.caught, reading.cells
