"""The schema loader a fold checks payloads with, from the counter's ports."""

from typing import TYPE_CHECKING, Any

from ledger.errors import LedgerError

if TYPE_CHECKING:
    from ledger.core.foldable import SchemaFor
    from ledger.services.ports import CounterDeps


def no_schemas(_event_type: str) -> None:
    """A schema loader that knows no event type (a fold that checks no payload)."""
    return


def schema_lookup(deps: "CounterDeps") -> "SchemaFor":
    """The deps' schema loader, answering ``None`` for an event type with no schema."""

    def schema_for(event_type: str) -> dict[str, Any] | None:
        try:
            return deps.schema(event_type)
        except LedgerError:
            return None

    return schema_for
