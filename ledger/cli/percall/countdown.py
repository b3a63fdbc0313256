"""``ledger time``: countdown budgets (seed 002), advisory."""

import argparse
from typing import Any

from ledger.cli.output import print_json
from ledger.cli.percall.agents import checked_count, home_runtime
from ledger.errors import UsageError

_MAX_BUDGET_SECONDS = 36_500 * 86_400


def _budget_end(environ: dict[str, str]) -> Any:
    """``LEDGER_BUDGET_END`` as a time, ``None`` when unset.

    Raises:
        ConfigError: set but not Unix seconds.
    """
    from ledger.core.agents.time import BUDGET_END_VARIABLE, parse_budget_end
    from ledger.errors import ConfigError

    text = environ.get(BUDGET_END_VARIABLE)
    if text is None or text == "":
        return None
    try:
        return parse_budget_end(text)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def time_start(home: str | None, args: argparse.Namespace) -> int:
    """``ledger time start --budget-seconds N`` or ``--end ISO``."""
    from ledger.core.timefmt import parse_iso8601
    from ledger.services.agents.time import time_start as start

    if (args.budget_seconds is None) == (args.end is None):
        raise UsageError("give exactly one of --budget-seconds N and --end ISO")
    seconds = None
    end = None
    if args.budget_seconds is not None:
        seconds = checked_count(args.budget_seconds, "--budget-seconds")
        if seconds > _MAX_BUDGET_SECONDS:
            raise UsageError(f"--budget-seconds: at most {_MAX_BUDGET_SECONDS} (a century)")
    else:
        try:
            end = parse_iso8601(args.end)
        except ValueError as exc:
            raise UsageError(f"--end: {exc}") from exc
    print_json(start(home_runtime(home), seconds, end))
    return 0


def time_status(home: str | None, args: argparse.Namespace) -> int:
    """``ledger time status``: advisory, exit 0."""
    from ledger.services.agents.time import time_status as status

    del args
    runtime = home_runtime(home)
    end = _budget_end(runtime.environ)
    print_json(status(runtime, end, runtime.clock.now()))
    return 0


def build(actions: Any) -> None:
    """Add the ``time`` actions to ``actions``, the family parser's sub-parsers."""
    start = actions.add_parser(
        "start",
        help="start the countdown",
        description=(
            "Start a wall-clock countdown; give exactly one of --budget-seconds and --end.\n"
            "LEDGER_BUDGET_END (Unix seconds), when set, overrides it for that process.\n"
            "Exit 0; 2 bad command line."
        ),
        epilog=(
            "Examples:\n"
            "  ledger time start --budget-seconds 3600\n"
            "  ledger time start --end 2026-06-01T18:00:00Z"
        ),
    )
    start.add_argument("--budget-seconds", metavar="N", help="seconds from now until the deadline")
    start.add_argument("--end", metavar="ISO", help="the deadline as an ISO-8601 time with a zone")
    start.set_defaults(handler=time_start)
    status = actions.add_parser(
        "status",
        help="remaining time and urgency tier",
        description=(
            "Show the time left before the deadline and its urgency tier (continue,\n"
            "wrap_up, commit_now, expired). Advisory: exit 0; 78 for a malformed\n"
            "LEDGER_BUDGET_END."
        ),
        epilog="Examples:\n  ledger time status\n  LEDGER_BUDGET_END=1780336800 ledger time status",
    )
    status.set_defaults(handler=time_status)
