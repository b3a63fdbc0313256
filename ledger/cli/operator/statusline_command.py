"""``ledger statusline``: Claude Code's status line from the ledger's own figures."""

import sys
from typing import Any

import typer

from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded


def statusline() -> None:
    """Print one line for Claude Code's statusLine: session spend, what is left, the reset.

    Reads Claude Code's status JSON on stdin and takes the session from its
    session_id. The spend is the ledger's record of the session (never the
    client's own cost figure); what is left is the tightest cap or budget that
    applies. `ledger hook install` adds it to the settings when they have no
    statusLine. Writes nothing; exit 0, or 78 with no ledger home.

    Example: echo '{"session_id": "abc"}' | ledger statusline
    """

    def body() -> int:
        from ledger.services.views.statusline import session_of, status_line

        session = session_of(sys.stdin.read(1 << 20))
        sys.stdout.write(status_line(_runtime(), session) + "\n")
        return 0

    code = guarded(body)
    if code:
        raise typer.Exit(code)


def register(app: Any) -> None:
    """Add ``statusline`` to the typer app."""
    app.command("statusline")(statusline)
