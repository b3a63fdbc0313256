"""Per-call USD commands: ``verdict``, ``record``, ``usage``."""

import argparse
from typing import Any


def register(commands: Any) -> None:
    """Add the USD gate's sub-commands."""
    del commands


__all__ = ["argparse", "register"]
