"""``ledger snapshot`` and ``ledger recover``."""

from typing import Any


def register(app: Any) -> None:
    """Add snapshot and recover to the typer app."""
    del app
