"""One budget's counters as a mapping that reads each counter from the index when asked.

The budgets' fold (``ledger.core.budget_state``) works on a mapping from
``per`` value to counter. Loaded from disk, that mapping is a ``StoredCounters``:
a counter is read from the index (``ledger.edges.files.countertable``) the
first time it is asked for, kept, and noted as touched, since the fold changes
counters in place; a save writes the touched ones only. Iterating reads every
row of the budget, which views do and verdicts never do.
"""

import copy
from collections.abc import Iterator, MutableMapping
from typing import Any

from ledger.edges.files.countertable import CounterTable


class StoredCounters(MutableMapping[str, Any]):
    """The counters of budget ``name`` in epoch ``epoch``, read on demand from ``buckets``."""

    def __init__(
        self,
        buckets: CounterTable,
        name: str,
        epoch: int,
        cache: dict[str, Any] | None = None,
        *,
        complete: bool = False,
    ) -> None:
        self.buckets = buckets
        self.name = name
        self.epoch = epoch
        self._cache: dict[str, Any] = cache if cache is not None else {}  # None: no counter
        self._touched: set[str] = set()
        self._complete = complete

    @property
    def damage(self) -> tuple[str, bool] | None:
        """What reading the index found wrong (see ``CounterTable``)."""
        return self.buckets.damage

    def __getitem__(self, value: str) -> Any:
        if value in self._cache:
            counter = self._cache[value]
        elif self._complete:
            counter = None
        else:
            counter = self._cache[value] = self.buckets.find(self.name, self.epoch, value)
        if counter is None:
            raise KeyError(value)
        self._touched.add(value)  # lent to a fold that may change it in place
        return counter

    def __setitem__(self, value: str, counter: Any) -> None:
        self._cache[value] = counter
        self._touched.add(value)

    def __delitem__(self, value: str) -> None:
        self[value]  # raises KeyError when there is no such counter
        self._cache[value] = None

    def __iter__(self) -> Iterator[str]:
        if not self._complete:
            for value, counter in self.buckets.scan(self.name, self.epoch).items():
                self._cache.setdefault(value, counter)
            self._complete = True
        return iter([value for value, counter in self._cache.items() if counter is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __deepcopy__(self, memo: dict[int, Any]) -> "StoredCounters":
        twin = StoredCounters(
            self.buckets, self.name, self.epoch, copy.deepcopy(self._cache, memo),
            complete=self._complete,
        )  # fmt: skip
        twin._touched = set(self._touched)
        return twin

    def changed(self) -> list[tuple[str, int, str, Any]]:
        """The counters touched since the last save, as ``(name, epoch, value, counter)``."""
        return [(self.name, self.epoch, v, self._cache.get(v)) for v in sorted(self._touched)]

    def saved(self) -> None:
        """The touched counters were written."""
        self._touched.clear()


def as_stored(
    buckets: CounterTable, name: str, epoch: int, values: dict[str, Any]
) -> StoredCounters:
    """A plain dict of counters, all of them written, as a ``StoredCounters``."""
    return StoredCounters(buckets, name, epoch, dict(values), complete=True)


def bind_counters(data: dict[str, Any], buckets: CounterTable) -> None:
    """Give each budget of a loaded state its counters as stored in ``buckets``."""
    for name, table in (data.get("budgets") or {}).get("by_name", {}).items():
        if table.get("values") is None:
            table["values"] = StoredCounters(buckets, name, int(table.get("epoch", 0)))


def write_counters(data: dict[str, Any], fresh: CounterTable) -> CounterTable:
    """Note the counters of a state about to be saved; the table they go to.

    A budget without ``per`` has one counter, kept inline in the state file.
    Counters loaded from the index are written if touched, into the same
    table; a budget whose counters are a plain dict (its period started
    afresh, or its first counters) gets a new epoch and all of them. A state
    with no counters from the index at all (folded afresh, or kept inline by an
    older version) makes ``fresh`` exactly its counters. Afterwards every
    budget's counters are a ``StoredCounters``.

    Raises:
        CountersLostError: the index lost records (the caller drops the state).
        ChainIOError: the index cannot be read.
    """
    from ledger.core.budget_state import NO_VALUE, counter_is_live

    by_name: dict[str, Any] = (data.get("budgets") or {}).get("by_name", {})

    def live(record: dict[str, Any]) -> bool:
        table = by_name.get(record["b"])
        if table is None or record["e"] != table.get("epoch", 0):
            return False
        return counter_is_live(table, record["c"])

    loaded = [t["values"] for t in by_name.values() if isinstance(t["values"], StoredCounters)]
    buckets = loaded[0].buckets if loaded else fresh
    changes: list[tuple[str, int, str, Any]] = []
    plain: list[tuple[str, dict[str, Any]]] = []
    for name, table in by_name.items():
        values = table["values"]
        if isinstance(values, StoredCounters) and values.buckets is buckets:
            changes.extend(values.changed())
            continue
        if not isinstance(values, StoredCounters) and set(values) <= {NO_VALUE}:
            continue  # one counter at most (no ``per``): kept inline, read with the state
        if loaded:
            table["epoch"] = int(table.get("epoch", -1)) + 1  # older records count no more
        else:
            table["epoch"] = int(table.get("epoch", 0))
        changes.extend((name, table["epoch"], value, counter) for value, counter in values.items())
        plain.append((name, table))
    buckets.remove_obsolete()  # the state on disk names their successors by now
    if loaded:
        buckets.save(changes, live)
    else:
        buckets.replace(changes)
    for values in loaded:
        values.saved()
    for name, table in plain:
        table["values"] = as_stored(buckets, name, table["epoch"], table["values"])
    return buckets
