"""``ledger serve``: the resident gate for one home (SPEC §9)."""

from pathlib import Path
from typing import Any

import typer

from ledger.cli.output import guarded


def serve_command() -> None:
    """Answer the per-call commands on gate.sock in the home until SIGTERM (exit 0).

    verdict, record, usage, tokens check|record, tools use|check, turns
    record|check and hook try the socket first and run in-process when no
    server answers, with the same output and exit codes. Many clients' entries
    are made durable by one fsync (group commit); every reply waits for it.
    Only processes of this server's uid are answered. Exit 75 when another
    server already answers for the home.

    Example: ledger --home /var/lib/ledger serve
    """

    def body() -> int:
        return serve(_home())

    code = guarded(body)
    if code:
        raise typer.Exit(code)


def _home() -> str | None:
    from ledger.cli.operator.shared import State

    return State.home


def serve(home_option: str | None) -> int:
    """Run the server of the home ``home_option`` names until it is stopped.

    Raises:
        NoHomeError, NotAHomeError: there is no home to serve.
        ServerBusyError: another server answers for the home.
        ChainIOError: the socket or its lock file cannot be made.
    """
    from ledger.cli.percall.parser import build_parser
    from ledger.cli.percall.served import execute
    from ledger.errors import ChainIOError
    from ledger.homes import check_home, resolve_home
    from ledger.server.loop import Server
    from ledger.server.protocol import Reply, Request

    home = resolve_home(home_option)
    check_home(home)  # a server on no home, or someone's folder, would write its lock there
    try:
        found = Path(home).stat()
    except OSError as exc:
        raise ChainIOError(f"cannot serve {home}: {exc.strerror} (run `ledger init`)") from exc
    identity = found.st_dev, found.st_ino
    parser: Any = build_parser()

    def run(request: Request) -> Reply:
        return execute(request, parser, identity, resident=True)

    return Server(home, run).serve()


def register(app: Any) -> None:
    """Add ``serve`` to the typer app."""
    app.command("serve")(serve_command)
