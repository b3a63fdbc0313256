"""The lean front door: argparse for the per-call commands (no typer import).

Each module of ``ledger.cli.percall`` registers its sub-commands; a handler takes the home
option and the parsed namespace and returns the exit code.
"""

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from ledger.cli.output import guarded, print_error
from ledger.errors import EXIT_USAGE

REGISTRARS = ("ledger.cli.percall.budget", "ledger.cli.percall.agents")

Handler = Callable[[str | None, argparse.Namespace], int]


def sentence(text: str) -> str:
    """An option's help as the operator commands print theirs: capitalised, ending in a stop."""
    text = text.strip()
    if text[:1].islower():
        text = text[:1].upper() + text[1:]
    if text and text[-1] not in ".!?:":
        text += "."
    return text


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help in the operator commands' (click's) style: one style for every command.

    ``Usage:``, ``Arguments:`` and ``Options:`` headings, and each entry's help a
    sentence; descriptions and epilogs keep their line breaks, so the examples
    can be copied and pasted as they are.
    """

    def add_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None = None) -> None:
        """The usage line, headed ``Usage:`` as click heads it."""
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)

    def _expand_help(self, action: argparse.Action) -> str:
        return sentence(super()._expand_help(action))


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one ``ledger: …`` line pointing at ``--help``; exit 2.

    Its help is laid out as the operator commands' is (``HelpFormatter``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._positionals.title = "Arguments"
        self._optionals.title = "Options"
        for action in self._actions:
            if isinstance(action, argparse._HelpAction):  # noqa: SLF001 - the -h it adds
                action.help = "Show this message and exit."

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        """A group of options, its title capitalised as the other headings are."""
        title = kwargs.get("title", args[0] if args else None)
        if isinstance(title, str) and title[:1].islower():
            title = title[:1].upper() + title[1:]
            if args:
                args = (title, *args[1:])
            else:
                kwargs["title"] = title
        return super().add_argument_group(*args, **kwargs)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """Parse; an argument nobody takes is reported with the command it was given to."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            # The top parser finds these, but the sub-command's --help is what helps.
            command = getattr(parsed, "command", None)
            prog = f"{self.prog} {command}" if command else self.prog
            usage_error(f"unrecognized arguments: {' '.join(extras)}", prog)
        return parsed

    def error(self, message: str) -> NoReturn:
        """One ``ledger:`` line naming the problem and where help is; exit 2."""
        usage_error(message, self.prog)


def usage_error(message: str, prog: str) -> NoReturn:
    """A bad command line: one ``ledger: …`` line on stderr, exit 2."""
    print_error(f"{message}; see `{prog} --help`")
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
    namespace = _parse(parser, args) if parser is not None else build_parser().parse_args(args)
    handler: Handler = namespace.handler
    return guarded(lambda: handler(home, namespace))


_PARSED_KEPT = 256
_parsed: dict[tuple[str, ...], dict[str, Any]] = {}


def _parse(parser: argparse.ArgumentParser, args: list[str]) -> argparse.Namespace:
    """``parser.parse_args(args)``, remembered for a long-lived process.

    Agents repeat the same few command lines; parsing is deterministic for a
    given argument list (every converter is ``int``), and only a parse that
    succeeded is remembered: errors and ``--help`` print and exit every time.
    """
    key = tuple(args)
    known = _parsed.get(key)
    if known is None:
        namespace = parser.parse_args(args)
        if len(_parsed) >= _PARSED_KEPT:
            _parsed.clear()
        _parsed[key] = dict(vars(namespace))
        return namespace
    # A fresh namespace (and fresh lists) each time: a handler may change its own.
    return argparse.Namespace(
        **{name: list(value) if isinstance(value, list) else value for name, value in known.items()}
    )
