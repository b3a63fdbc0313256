"""Budgets' per-value counters in the derived index (``counters`` in ``index.sqlite3``).

A budget with ``per`` keeps one counter for each value it has seen (sessions,
agents, keys: an agent picks them freely), so its counters live in the index,
not in ``derived.json``: a verdict reads the rows of the counters it touches
(one B-tree lookup each) and a save writes a row for each counter it changed.

The state file records the ``seq`` of the save that wrote it; a counter is
read as that save knows it (``IndexDb.find_counter``). Damage found while
reading is noted in ``damage`` (its description, and whether records were lost
rather than edited), never raised: the fold that asked goes on, and its caller
decides before trusting or saving anything.
"""

from collections.abc import Callable, Iterable
from typing import Any

from ledger.edges.files.indexdb import CountersBehindError, IndexDb
from ledger.errors import ChainIOError, StateMismatchError

Record = dict[str, Any]
Change = tuple[str, int, str, Any]


class CountersLostError(ChainIOError):
    """The index cannot answer for the state's counters: rebuilt from the chain."""


class CounterTable:
    """The counters as one saved state (``seq``) knows them, and the changes of the next save."""

    def __init__(self, index: IndexDb | None, seq: int = 0) -> None:
        self.index = index
        self.seq = seq
        self.damage: tuple[str, bool] | None = None
        # What the next save writes: the changed counters, and whether they
        # are all of them (a state folded afresh).
        self.changes: list[Change] = []
        self.replacing = False

    def _note(self, problem: str, *, lost: bool) -> None:
        if self.damage is None or (lost and not self.damage[1]):
            self.damage = (problem, lost)

    def find(self, name: str, epoch: int, value: str) -> Any:
        """The counter of ``value`` in epoch ``epoch`` of budget ``name``, or ``None``."""
        if self.index is None:
            return None
        try:
            return self.index.find_counter(name, epoch, value, self.seq)
        except CountersBehindError as exc:
            self._note(str(exc), lost=True)
        except StateMismatchError as exc:
            self._note(f"{exc} (edited?)", lost="unreadable" in str(exc))
        return None

    def scan(self, name: str, epoch: int) -> dict[str, Any]:
        """Every counter of budget ``name`` in epoch ``epoch`` (``None``: removed)."""
        if self.index is None:
            return {}
        try:
            return self.index.scan_counters(name, epoch, self.seq)
        except CountersBehindError as exc:
            self._note(str(exc), lost=True)
        except StateMismatchError as exc:
            self._note(f"{exc} (edited?)", lost="unreadable" in str(exc))
        return {}

    def save(self, changes: Iterable[Change], live: Callable[[Record], bool]) -> None:
        """Note changed counters ``(name, epoch, value, counter)`` for the next save."""
        del live  # every row is kept: a B-tree lookup costs the same however many there are
        self.changes.extend(changes)

    def replace(self, changes: Iterable[Change]) -> None:
        """Make the counters exactly these (a state folded afresh) at the next save."""
        self.changes = [change for change in changes if change[3] is not None]
        self.replacing = True

    def remove_obsolete(self) -> None:
        """Nothing to remove: rows are replaced in place."""
