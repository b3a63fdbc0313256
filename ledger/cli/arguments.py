"""What the front door reads before it knows which command runs.

Kept in a module of its own, below ``ledger.cli`` and the served path, so that
both can read the global options without importing each other.
"""

FAST_COMMANDS = frozenset(
    {"verdict", "record", "usage", "hook", "tokens", "turns", "tools", "time"}
)


def split_global_options(args: list[str]) -> tuple[str | None, list[str]]:
    """Take ``--home DIR`` (or ``--home=DIR``) from before the command."""
    home = None
    rest = list(args)
    while rest:
        if rest[0] == "--home" and len(rest) > 1:
            home = rest[1]
            rest = rest[2:]
        elif rest[0].startswith("--home="):
            home = rest[0].split("=", 1)[1]
            rest = rest[1:]
        else:
            break
    return home, rest
