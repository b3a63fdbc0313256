"""``ledger statusline``: Claude Code's status line from the ledger's own figures."""

import sys
from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded


def statusline(
    gateway: Annotated[
        str | None,
        typer.Option(
            "--gateway",
            metavar="URL",
            help="No ledger home here (a laptop): ask this gateway for the key's figures.",
        ),
    ] = None,
    key_env: Annotated[
        str,
        typer.Option(
            "--key-env", metavar="VAR", help="With --gateway: the variable holding the gateway key."
        ),
    ] = "LEDGER_GATEWAY_KEY",
) -> None:
    """Print one line for Claude Code's statusLine: session spend, what is left, the reset.

    Reads Claude Code's status JSON on stdin and takes the session from its
    session_id. The spend is the ledger's record of the session (never the
    client's own cost figure); what is left is the tightest cap or budget that
    applies. `ledger hook install` adds it to the settings when they have no
    statusLine. With --gateway URL (a laptop without a home) it shows the key's
    spend today and what is left, as the gateway answers them, or says why it
    cannot. Writes nothing; exit 0, or 78 with no ledger home.

    Example: echo '{"session_id": "abc"}' | ledger statusline

    Example: ledger statusline --gateway https://gw.example:8787 --key-env LEDGER_KEY
    """

    def body() -> int:
        from ledger.services.views.statusline import session_of, status_line

        if gateway is not None:
            sys.stdout.write(_laptop_line(gateway, key_env) + "\n")
            return 0
        session = session_of(sys.stdin.read(1 << 20))
        sys.stdout.write(status_line(_runtime(), session) + "\n")
        return 0

    code = guarded(body)
    if code:
        raise typer.Exit(code)


def _laptop_line(gateway: str, key_env: str) -> str:
    import os

    from ledger.edges.gatewayme import ask_me
    from ledger.services.views.statusline import laptop_status_line

    return laptop_status_line(
        lambda secret: ask_me(gateway, secret, 5.0), key_env, os.environ.get(key_env) or None
    )


def register(app: Any) -> None:
    """Add ``statusline`` to the typer app."""
    app.command("statusline")(statusline)
