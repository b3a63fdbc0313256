"""What the rollups need from the outside: their store and the runtime's parts (ports)."""

from contextlib import AbstractContextManager
from typing import Any, Protocol

from ledger.core.rollups import CellKey
from ledger.services.ports import CounterDeps


class RollupTx(Protocol):
    """One write transaction on the rollup store."""

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

    def writing(self) -> AbstractContextManager[RollupTx]:
        """One immediate transaction."""
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
