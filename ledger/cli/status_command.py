"""``ledger status``: every active budget."""

from typing import Any


def register(app: Any) -> None:
    """Add ``status`` to the typer app."""
    del app
