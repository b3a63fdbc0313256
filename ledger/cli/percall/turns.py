"""``ledger turns``: workflow turn budgets (seed 000), advisory."""

import argparse
from collections.abc import Callable
from typing import Any

from ledger.cli.output import print_error, print_json
from ledger.cli.percall.agents import checked_count, checked_id, home_runtime


def turns_create(home: str | None, args: argparse.Namespace) -> int:
    """``ledger turns create WORKFLOW --total N --phase N``."""
    from ledger.services.agents.turns import turns_create as create

    workflow = checked_id(args.workflow, "WORKFLOW")
    total = checked_count(args.total, "--total", minimum=1)
    phase = checked_count(args.phase, "--phase", minimum=1)
    print_json(create(home_runtime(home), workflow, total, phase))
    return 0


def turns_phase(home: str | None, args: argparse.Namespace) -> int:
    """``ledger turns phase WORKFLOW NAME [--phase N]``: a phase transition."""
    from ledger.core.agents.ids import check_phase
    from ledger.services.agents.turns import turns_phase as phase

    workflow = checked_id(args.workflow, "WORKFLOW")
    name = check_phase(args.name)
    limit = None if args.phase is None else checked_count(args.phase, "--phase", minimum=1)
    print_json(phase(home_runtime(home), workflow, name, limit))
    return 0


def turns_record(home: str | None, args: argparse.Namespace) -> int:
    """``ledger turns record WORKFLOW [--type tool_use|file_change|delegation]``."""
    from ledger.services.agents.turns import turns_record as record

    workflow = checked_id(args.workflow, "WORKFLOW")
    runtime = home_runtime(home)  # a missing home is an error, not advice
    return _advisory(workflow, lambda: record(runtime, workflow, args.type))


def turns_check(home: str | None, args: argparse.Namespace) -> int:
    """``ledger turns check WORKFLOW``: advisory, exit 0 always."""
    from ledger.services.agents.turns import turns_check as check

    workflow = checked_id(args.workflow, "WORKFLOW")
    runtime = home_runtime(home)  # a missing home is an error, not advice
    return _advisory(workflow, lambda: check(runtime, workflow))


def _advisory(workflow: str, action: Callable[[], dict[str, Any]]) -> int:
    """Turn budgets are advisory (seed 000): exit 0 even when nothing can be recorded.

    A bad command line is still exit 2 (raised before this); any other failure
    prints the no-budget advice with the reason, plus the one stderr line.
    """
    from ledger.core.agents.turns import no_budget
    from ledger.errors import LedgerError

    try:
        print_json(action())
    except LedgerError as exc:
        print_error(f"turn not recorded: {exc}")
        print_json({**no_budget(workflow), "check_ref": None, "diagnostic": str(exc)})
    return 0


def build(actions: Any) -> None:
    """Add the ``turns`` actions to ``actions``, the family parser's sub-parsers."""
    create = actions.add_parser(
        "create",
        help="create (or reset) a workflow budget",
        description=(
            "Create (or reset) a workflow's turn budget: a limit for all its turns and one\n"
            "for the current phase. Exit 0; 2 bad command line."
        ),
        epilog="Example:\n  ledger turns create fix-login --total 40 --phase 15",
    )
    create.add_argument(
        "workflow",
        metavar="WORKFLOW",
        help="the workflow's name: letters, digits and . _ : - (up to 128)",
    )
    create.add_argument(
        "--total", required=True, metavar="N", help="most turns in the whole workflow (1 or more)"
    )
    create.add_argument(
        "--phase", required=True, metavar="N", help="most turns in each phase (1 or more)"
    )
    create.set_defaults(handler=turns_create)
    phase = actions.add_parser(
        "phase",
        help="start a new phase",
        description=(
            "Start a new phase of a workflow: its phase turn count starts again from 0.\n"
            "Exit 0; 2 bad command line."
        ),
        epilog="Example:\n  ledger turns phase fix-login implement --phase 20",
    )
    phase.add_argument("workflow", metavar="WORKFLOW", help="the workflow entering a new phase")
    phase.add_argument(
        "name", metavar="NAME", help="the new phase's name (1 to 128 printable characters)"
    )
    phase.add_argument(
        "--phase",
        metavar="N",
        help="a new turn limit for this and later phases (default: keep the current one)",
    )
    phase.set_defaults(handler=turns_phase)
    record = actions.add_parser(
        "record",
        help="count one turn",
        description=(
            "Count one turn of a workflow and print the advisory verdict: 80% of the total\n"
            "or phase limit warns, 100% is exceeded. Advisory: exit 0 always (2 for a bad\n"
            "command line); the verdict is in the JSON."
        ),
        epilog="Example:\n  ledger turns record fix-login --type file_change",
    )
    record.add_argument("workflow", metavar="WORKFLOW", help="the workflow taking the turn")
    record.add_argument(
        "--type",
        default="tool_use",
        choices=("tool_use", "file_change", "delegation"),
        help="what kind of turn it was (default tool_use)",
    )
    record.set_defaults(handler=turns_record)
    check = actions.add_parser(
        "check",
        help="advisory check",
        description=(
            "Show a workflow's turn verdict without counting a turn. Advisory: exit 0\n"
            "always (2 for a bad command line); the verdict is in the JSON."
        ),
        epilog="Example:\n  ledger turns check fix-login",
    )
    check.add_argument("workflow", metavar="WORKFLOW", help="the workflow to check")
    check.set_defaults(handler=turns_check)
