"""The lean front door: argparse for the per-call commands (no typer import).

Each ``fast_*`` module registers its sub-commands; a handler takes the home
option and the parsed namespace and returns the exit code.
"""

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from ledger.cli.output import guarded, print_error
from ledger.errors import EXIT_USAGE

REGISTRARS = ("ledger.cli.fast_budget", "ledger.cli.fast_agents")

Handler = Callable[[str | None, argparse.Namespace], int]


class Parser(argparse.ArgumentParser):
    """argparse whose errors end in one ``ledger: …`` line and exit 2.

    Descriptions and epilogs keep their line breaks, so the examples in
    ``--help`` can be copied and pasted as they are.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print usage and one ``ledger:`` line; exit 2."""
        self.print_usage(sys.stderr)
        print_error(message)
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every per-call command."""
    parser = Parser(prog="ledger")
    parser.add_argument("--home", help=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in REGISTRARS:
        importlib.import_module(name).register(commands)
    return parser


def run(home: str | None, args: list[str], parser: argparse.ArgumentParser | None = None) -> int:
    """Parse and run one per-call command; returns its exit code.

    A long-lived process (``ledger serve``) passes the parser it built once:
    building it costs more than most commands.
    """
    namespace = (parser or build_parser()).parse_args(args)
    handler: Handler = namespace.handler
    return guarded(lambda: handler(home, namespace))
