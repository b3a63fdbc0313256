"""What the rollups need from the outside: their store and the runtime's parts (ports)."""

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ledger.core.budget_facts import Cell, FactsFold, Pending
from ledger.core.budget_facts import CellKey as FactsCellKey
from ledger.core.rollups import CellKey
from ledger.services.ports import CounterDeps


class CallRows(Protocol):
    """The calls table: one row per call (``services/views/calls``), by chain line."""

    def by_ref(self, ref: str) -> dict[str, Any] | None:
        """The row of the call whose verdict (or lone record) is ``ref``."""
        ...

    def put(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert or replace whole rows."""
        ...

    def page(
        self,
        equal: Mapping[str, str],
        start: str | None,
        end: str | None,
        before_line: int | None,
        limit: int,
    ) -> list[dict[str, Any]]:
        """Rows newest first, before line ``before_line``, equal to the filters, in the range."""
        ...

    def recorded_since(self, since: str, equal: Mapping[str, str] | None = None) -> int:
        """Micro-USD recorded at or after ``since``."""
        ...

    def halt_times(self, since: str) -> list[str]:
        """The times of halted verdicts at or after ``since``."""
        ...

    def groups(
        self, by: str, equal: Mapping[str, str], start: str | None, end: str | None
    ) -> list[dict[str, Any]]:
        """Calls, micro-USD and halts per value of ``by``."""
        ...


class BudgetFactRows(Protocol):
    """The budget facts (``core.budget_facts``) as the rollups keep them."""

    def find_pending(self, ref: str) -> Pending | None:
        """The live reservation of a verdict, as stored."""
        ...

    def write(self, fold: FactsFold, totals: dict[str, Any]) -> dict[str, Any]:
        """Store what the fold gathered (and empty it); the new totals."""
        ...

    def read(
        self, from_slot: int, totals: dict[str, Any]
    ) -> tuple[list[tuple[FactsCellKey, Cell]], list[tuple[str, Pending]], list[int]]:
        """The cells and doubts from ``from_slot``, every live reservation, checked."""
        ...


class RollupTx(Protocol):
    """One write transaction on the rollup store."""

    @property
    def calls(self) -> CallRows:
        """The calls table."""
        ...

    @property
    def budget_facts(self) -> BudgetFactRows:
        """The budget facts."""
        ...

    def position(self) -> dict[str, Any] | None:
        """The saved position, or ``None``."""
        ...

    def clear(self) -> None:
        """Forget every row."""
        ...

    def add(self, cells: dict[CellKey, list[int]], marks: dict[int, list[Any]]) -> None:
        """Add folded cells and marks."""
        ...

    def save_position(self, position: dict[str, Any]) -> None:
        """Record the position."""
        ...

    def cells(self, first_slot: int, end_slot: int) -> list[tuple[CellKey, tuple[int, ...]]]:
        """The checked cells of a slot range."""
        ...

    def mark_from(self, slot: int) -> list[Any] | None:
        """``[entries, size, prev_hash]`` before the first entry at or after ``slot``."""
        ...


class RollupStore(Protocol):
    """Where the rollups live."""

    def writing(self, wait_seconds: float | None = None) -> AbstractContextManager[RollupTx]:
        """One immediate transaction (``wait_seconds`` for another writer to finish)."""
        ...

    def delete(self) -> None:
        """Drop the rollups."""
        ...


class RollupDeps(CounterDeps, Protocol):
    """What the rollups need: the chain, its trust and checkpoints, and their store."""

    @property
    def rollups(self) -> RollupStore:
        """The rollup store."""
        ...
