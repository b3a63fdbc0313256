"""Per-call agent-budget commands: ``tokens``, ``turns``, ``tools``, ``time``, ``hook``."""

from typing import Any


def register(commands: Any) -> None:
    """Add the agent-budget sub-commands."""
    del commands
