"""``ledger tools``: per-agent tool-call budgets by role (seed 001)."""

import argparse
from typing import Any

from ledger.cli.output import print_json
from ledger.cli.percall.agents import checked_count, checked_id, home_runtime
from ledger.errors import EXIT_HALT


def tools_create(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tools create AGENT --role R [--files N] ...``: a tool-call budget by role.

    Builder budgets come from the planner's formula (seed 001).
    """
    from ledger.core.agents.ids import decimal_text, parse_fraction
    from ledger.services.agents.tools import tools_create as create

    agent = checked_id(args.agent, "AGENT")
    files = checked_count(args.files, "--files")
    confidence = None
    if args.framework_confidence is not None:
        value = parse_fraction(args.framework_confidence, "--framework-confidence", low=0, high=1)
        confidence = decimal_text(value)
    result = create(home_runtime(home), agent, args.role, files, args.prior_failures, confidence)
    print_json(result)
    return 0


def tools_use(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tools use AGENT [--exempt]``: exit 1 when refused (budget exhausted)."""
    from ledger.services.agents.tools import tools_use as use

    answer = use(home_runtime(home), checked_id(args.agent, "AGENT"), args.exempt)
    print_json(answer.view)
    return 0 if answer.allowed else EXIT_HALT


def tools_check(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tools check AGENT``: exit 1 when exhausted."""
    from ledger.services.agents.tools import tools_check as check

    answer = check(home_runtime(home), checked_id(args.agent, "AGENT"))
    print_json(answer.view)
    return 0 if answer.allowed else EXIT_HALT


def build(actions: Any) -> None:
    """Add the ``tools`` actions to ``actions``, the family parser's sub-parsers."""
    create = actions.add_parser(
        "create",
        help="assign a budget by role",
        description=(
            "Give an agent a tool-call budget by role: explorer 4, observer 10, planner\n"
            "unlimited, builder min(9, 5 + (files - 1) + 2 if prior failures or framework\n"
            "confidence >= 0.6). Exit 0; 2 bad command line."
        ),
        epilog=(
            "Examples:\n"
            "  ledger tools create scout-1 --role explorer\n"
            "  ledger tools create builder-1 --role builder --files 3 --framework-confidence 0.7"
        ),
    )
    create.add_argument(
        "agent", metavar="AGENT", help="the agent's name: letters, digits and . _ : - (up to 128)"
    )
    create.add_argument(
        "--role",
        required=True,
        choices=("explorer", "planner", "builder", "observer"),
        help="the agent's role, which sets its budget",
    )
    create.add_argument(
        "--files",
        default="1",
        metavar="N",
        help="files the builder's task touches; each beyond the first adds a call (default 1)",
    )
    create.add_argument(
        "--prior-failures",
        action="store_true",
        help="the task failed before: a builder gets 2 more calls",
    )
    create.add_argument(
        "--framework-confidence",
        metavar="X",
        help="the planner's confidence in the framework, 0 to 1; "
        "0.6 or more gives a builder 2 more calls",
    )
    create.set_defaults(handler=tools_create)
    use = actions.add_parser(
        "use",
        help="use one tool call",
        description=(
            "Count one tool call of an agent, printing Budget: used/total.\n"
            "Exit 0 allowed; 1 refused (budget exhausted); 2 bad command line."
        ),
        epilog="Examples:\n  ledger tools use builder-1\n  ledger tools use builder-1 --exempt",
    )
    use.add_argument("agent", metavar="AGENT", help="the agent making the call")
    use.add_argument(
        "--exempt",
        action="store_true",
        help="an exempt action (preflight, memory, phase transition): admitted and not counted",
    )
    use.set_defaults(handler=tools_use)
    check = actions.add_parser(
        "check",
        help="check the budget",
        description=(
            "Show an agent's tool-call budget without using a call.\n"
            "Exit 0 calls left; 1 exhausted; 2 bad command line."
        ),
        epilog="Example:\n  ledger tools check builder-1",
    )
    check.add_argument("agent", metavar="AGENT", help="the agent to check")
    check.set_defaults(handler=tools_check)
