"""Reading a budget's counters outside the fold: for views, and damage checks before a verdict."""

from collections.abc import Sequence
from typing import Any

from ledger.core.budget_state import NO_VALUE, counter_is_live
from ledger.core.budgets import Applicable, Budget


def all_counters(state: dict[str, Any], budget: Budget) -> list[str]:
    """The ``per`` values a budget has live counters for (``NO_VALUE`` without ``per``).

    Reads every counter of the budget: for views, never for a verdict.
    """
    table = state["by_name"].get(budget.name)
    if table is None:
        return []
    return sorted(v for v, counter in table["values"].items() if counter_is_live(table, counter))


def read_counters(state: dict[str, Any] | None, found: Sequence[Applicable]) -> None:
    """Ask for the counters of these applicable budgets now (a store reads them here).

    Damage the store finds is then known before anything is decided
    (``counters_damage``).
    """
    if not state:
        return
    for each in found:
        table = state["by_name"].get(each.budget.name)
        if table is not None:
            table["values"].get(each.per_value or NO_VALUE)


def counters_damage(state: dict[str, Any] | None) -> tuple[str, bool] | None:
    """What a store of counters found wrong while reading, and whether records were lost.

    ``None`` for plain dicts and for stores that found nothing wrong.
    """
    for table in (state or {}).get("by_name", {}).values():
        damage: tuple[str, bool] | None = getattr(table["values"], "damage", None)
        if damage is not None:
            return damage
    return None
