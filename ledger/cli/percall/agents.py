"""Per-call agent-budget commands: ``tokens``, ``turns``, ``tools``, ``time``, ``hook``.

Each family lives in its own module (``tokens``, ``turns``,
``tools``, ``countdown``, ``hooks``), imported only when that family's
parser is built. Imports stay inside the handlers: ``ledger hook pre-tool-use``
runs before every tool use of an agent and pays only for what it touches.
"""

import argparse
import importlib
from typing import Any, NamedTuple


class Family(NamedTuple):
    """One command family: its help, the module that builds its actions, an example."""

    help: str
    module: str
    actions: str
    example: str


_FAMILIES: dict[str, Family] = {
    "tokens": Family("convoy token budgets", "ledger.cli.percall.tokens",
                     "create, list, delete, report, check, record",
                     "ledger tokens check release-7 builder-1 4000"),
    "turns": Family("workflow turn budgets", "ledger.cli.percall.turns",
                    "create, phase, record, check",
                    "ledger turns record fix-login --type tool_use"),
    "tools": Family("per-agent tool-call budgets", "ledger.cli.percall.tools",
                    "create, use, check", "ledger tools use builder-1"),
    "time": Family("countdown budgets", "ledger.cli.percall.countdown", "start, status",
                   "ledger time start --budget-seconds 3600"),
    "hook": Family("Claude Code hook adapters", "ledger.cli.percall.hooks",
                   "pre-tool-use, post-tool-use, stop, user-prompt-submit, session-end, install",
                   "ledger hook pre-tool-use < pre-tool-use.json"),
}  # fmt: skip


def home_runtime(home: str | None, *, must_exist: bool = True) -> Any:
    """The runtime of ``home`` (the ``--home`` option; ``None`` for the default).

    Raises:
        NoHomeError: ``must_exist`` and there is no such home.
    """
    from ledger.runtime import build_runtime

    return build_runtime(home, must_exist=must_exist)


def checked_id(value: str, what: str) -> str:
    """``value`` as a budget name (convoy, agent, workflow); ``what`` names it in errors."""
    from ledger.core.agents.ids import check_id

    return check_id(value, what)


def checked_count(text: str, what: str, minimum: int = 0) -> int:
    """``text`` as a whole number of at least ``minimum``; ``what`` names it in errors."""
    from ledger.core.agents.ids import parse_count

    return parse_count(text, what, minimum=minimum)


# Each family's parser once built: ``ledger serve`` answers every hook with the
# same one, and building it (four argparse parsers, a gettext look-up per
# label) cost each served hook ~2 ms. Parsing leaves a parser as it was.
_BUILT: dict[str, argparse.ArgumentParser] = {}


def _family_parser(name: str) -> argparse.ArgumentParser:
    from ledger.cli.percall.parser import Parser

    parser = _BUILT.get(name)
    if parser is None:
        family = _FAMILIES[name]
        parser = Parser(prog=f"ledger {name}", description=family.help)
        importlib.import_module(family.module).build(
            parser.add_subparsers(
                dest="action", required=True, metavar="ACTION", parser_class=Parser
            )
        )
        _BUILT[name] = parser
    return parser


def _dispatch(name: str) -> Any:
    def handler(home: str | None, args: argparse.Namespace) -> int:
        namespace = _family_parser(name).parse_args(args.args)
        result: int = namespace.handler(home, namespace)
        return result

    return handler


def register(commands: Any) -> None:
    """Add the agent-budget command families.

    Each family's actions are parsed by a second parser built only when that
    family runs: the hook, called before every tool use, does not pay for
    building the 25 parsers of the other families. The ``family_parser``
    default builds it on request, so help and documentation can list every
    action.
    """
    for name, family in _FAMILIES.items():
        parser = commands.add_parser(
            name,
            help=family.help,
            description=f"{family.help[:1].upper()}{family.help[1:]}.",
            usage=f"ledger {name} ACTION ...",
            epilog=(
                f"Actions: {family.actions}\n"
                f"  (`ledger {name} ACTION --help` explains each)\n\n"
                f"Example:\n  {family.example}"
            ),
        )
        parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        parser.set_defaults(
            handler=_dispatch(name),
            family_parser=lambda name=name: _family_parser(name),
        )
