"""What every typer (operator) command module shares: the runtime and the exit."""

from typing import Any

import typer


class State:
    """Options given before the command (``--home``), set by the app's callback."""

    home: str | None = None


def runtime(*, must_exist: bool = True) -> Any:
    """The composition root for the home given before the command.

    Raises:
        NoHomeError: ``must_exist`` and there is no such home.
    """
    from ledger.runtime import build_runtime

    return build_runtime(State.home, must_exist=must_exist)


def exit_with(code: int) -> None:
    """Leave a typer command with ``code`` (nothing to do for 0)."""
    if code:
        raise typer.Exit(code)
