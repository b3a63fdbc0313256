"""The ``statusLine`` entry ``ledger hook install`` adds to Claude Code's settings.

Added only when the settings have none: a status line someone chose is never
replaced (the install says so instead).
"""

import shlex
from typing import Any

from ledger.core.hook_settings import Laptop, Place

ADDED = "added"
KEPT = "kept: these settings already have a statusLine, which ledger never replaces"
CURRENT = "already ledger's"


def statusline_command(launcher: list[str], home: Place) -> str:
    """The command Claude Code runs for its status line (on a laptop: asking the gateway)."""
    if isinstance(home, Laptop):
        return shlex.join([*launcher, "statusline", *home.options()])
    return shlex.join([*launcher, "--home", home, "statusline"])


def with_statusline(
    settings: dict[str, Any], launcher: list[str], home: Place
) -> tuple[dict[str, Any], str]:
    """``settings`` with ledger's status line when none is set, and what happened."""
    command = statusline_command(launcher, home)
    existing = settings.get("statusLine")
    if existing is not None:
        mine = isinstance(existing, dict) and existing.get("command") == command
        return settings, CURRENT if mine else KEPT
    return {**settings, "statusLine": {"type": "command", "command": command, "padding": 0}}, ADDED
