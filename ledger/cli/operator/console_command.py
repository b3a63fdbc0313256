"""``ledger console``: spend seen and steered from a browser."""

from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import exit_with
from ledger.cli.output import guarded


def console_command(
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen",
            help="HOST:PORT to listen on (default: console.listen, else 127.0.0.1:8788). "
            "An address other machines can reach needs console.tls_certfile and "
            "console.tls_keyfile, or console.behind_proxy = true.",
        ),
    ] = None,
) -> None:
    """Serve the web console: overview, live feed, spend, calls, keys, alerts, integrity.

    Prints one sign-in link on stderr (a one-time token, valid 10 minutes); console
    keys (`ledger keys issue NAME --role admin|viewer`) sign in after that, and a
    gateway key sees its own view only. It reads the home and changes nothing but
    keys. SIGTERM stops it.

    Example: ledger --home /var/lib/ledger console --listen 127.0.0.1:8788
    """

    def body() -> int:
        from ledger.cli.operator.shared import State
        from ledger.console.serve import run_console
        from ledger.homes import resolve_home

        return run_console(resolve_home(State.home), listen)

    exit_with(guarded(body))


def register(app: Any) -> None:
    """Add ``console`` to the typer app."""
    app.command("console")(console_command)
