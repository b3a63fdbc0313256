"""The lean front door: argparse for the per-call commands (no typer import)."""

import argparse
import sys
from typing import NoReturn

from ledger.cli.output import print_error
from ledger.errors import EXIT_USAGE


class _Parser(argparse.ArgumentParser):
    """argparse whose errors end in one ``ledger: …`` line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print_error(message)
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every per-call command."""
    parser = _Parser(prog="ledger", add_help=True)
    parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    return parser


def run(home: str | None, args: list[str]) -> int:
    """Parse and run one per-call command; returns its exit code."""
    parser = build_parser()
    parser.parse_args(args)
    del home
    return 0
