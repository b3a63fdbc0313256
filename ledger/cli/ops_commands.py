"""Operator commands: ``reconcile``, ``snapshot``, ``recover``, ``rebuild-state``, ``daemon``."""

from typing import Any


def register(app: Any) -> None:
    """Add the operations commands to the typer app."""
    del app
