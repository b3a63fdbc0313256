"""``ledger tokens``: convoy token budgets (seed 003), checked before a call and recorded after."""

import argparse
import re
from typing import Any

from ledger.cli.output import print_error, print_json
from ledger.cli.percall.agents import checked_count, checked_id, home_runtime
from ledger.errors import EXIT_HALT, UsageError

_REF_RE = re.compile(r"^[0-9a-f]{64}$")


def tokens_create(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens create CONVOY [--convoy-max N] [--agent-max N] [--warn-pct P]``."""
    from ledger.core.agents.ids import parse_pct
    from ledger.services.agents.tokens import tokens_create as create

    convoy = checked_id(args.convoy, "CONVOY")
    convoy_max = checked_count(args.convoy_max, "--convoy-max")
    agent_max = checked_count(args.agent_max, "--agent-max")
    warn = parse_pct(args.warn_pct, "--warn-pct")
    print_json(create(home_runtime(home), convoy, convoy_max, agent_max, warn))
    return 0


def tokens_list(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens list``."""
    from ledger.services.agents.tokens import tokens_list as listing

    del args
    print_json(listing(home_runtime(home)))
    return 0


def tokens_delete(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens delete CONVOY``."""
    from ledger.services.agents.tokens import tokens_delete as delete

    print_json(delete(home_runtime(home), checked_id(args.convoy, "CONVOY")))
    return 0


def tokens_report(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens report CONVOY``."""
    from ledger.services.agents.tokens import tokens_report as report

    print_json(report(home_runtime(home), checked_id(args.convoy, "CONVOY")))
    return 0


def tokens_check(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens check CONVOY AGENT PROJECTED``: exit 0 allowed, 1 refused."""
    from ledger.services.agents.tokens import tokens_check as check

    convoy = checked_id(args.convoy, "CONVOY")
    agent = checked_id(args.agent, "AGENT")
    projected = checked_count(args.projected, "PROJECTED")
    answer = check(home_runtime(home), convoy, agent, projected)
    print_json(answer.as_json(convoy, agent, projected))
    if answer.recording_error is not None:
        print_error(f"check not recorded: {answer.recording_error}")
    return 0 if answer.allowed else EXIT_HALT


def tokens_record(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens record CONVOY AGENT INPUT OUTPUT [--check-ref R]``."""
    from ledger.services.agents.tokens import tokens_record as record

    convoy = checked_id(args.convoy, "CONVOY")
    agent = checked_id(args.agent, "AGENT")
    tokens_in = checked_count(args.input, "INPUT")
    tokens_out = checked_count(args.output, "OUTPUT")
    if args.check_ref is not None and not _REF_RE.fullmatch(args.check_ref):
        raise UsageError("--check-ref: must be a 64-digit lowercase hex hash")
    from ledger.cli.percall.budget import idempotency_key

    key = idempotency_key(args.idempotency_key)
    result, warning = record(
        home_runtime(home), convoy, agent, tokens_in, tokens_out, args.check_ref, key
    )
    if warning:
        print_error(f"warning: {warning}")
    print_json(result)
    return 0


def build(actions: Any) -> None:
    """Add the ``tokens`` actions to ``actions``, the family parser's sub-parsers."""
    create = actions.add_parser(
        "create",
        help="create a convoy budget",
        description=(
            "Create (or replace) the token budget of a convoy of agents: a limit for the\n"
            "whole convoy and one for each agent in it. Exit 0; 2 bad command line."
        ),
        epilog="Example:\n  ledger tokens create release-7 --convoy-max 500000 --agent-max 100000",
    )
    create.add_argument(
        "convoy",
        metavar="CONVOY",
        help="the convoy's name: letters, digits and . _ : - (up to 128)",
    )
    create.add_argument(
        "--convoy-max",
        default="500000",
        metavar="N",
        help="most tokens the whole convoy may use (default 500000)",
    )
    create.add_argument(
        "--agent-max",
        default="100000",
        metavar="N",
        help="most tokens any one agent of the convoy may use (default 100000)",
    )
    create.add_argument(
        "--warn-pct",
        default="80",
        metavar="P",
        help="usage percentage from which checks answer warning_threshold (default 80)",
    )
    create.set_defaults(handler=tokens_create)
    listing = actions.add_parser(
        "list",
        help="list convoy budgets",
        description="List every convoy budget with its limits and use so far. Exit 0.",
        epilog="Example:\n  ledger tokens list",
    )
    listing.set_defaults(handler=tokens_list)
    delete = actions.add_parser(
        "delete",
        help="delete a convoy budget",
        description=(
            "Delete a convoy budget; its history stays in the chain.\nExit 0; 2 bad command line."
        ),
        epilog="Example:\n  ledger tokens delete release-7",
    )
    delete.add_argument("convoy", metavar="CONVOY", help="the convoy whose budget to delete")
    delete.set_defaults(handler=tokens_delete)
    report = actions.add_parser(
        "report",
        help="a convoy's usage report",
        description=(
            "Report a convoy's use: totals, reservations and each agent's share.\n"
            "Writes nothing. Exit 0; 2 bad command line."
        ),
        epilog="Example:\n  ledger tokens report release-7",
    )
    report.add_argument("convoy", metavar="CONVOY", help="the convoy to report on")
    report.set_defaults(handler=tokens_report)
    check = actions.add_parser(
        "check",
        help="check and reserve before a call",
        description=(
            "Before a call: check that PROJECTED more tokens keep the convoy and the agent\n"
            "within their limits (reaching a limit exactly is allowed) and reserve them.\n"
            "Prints check_ref, allowed, reason, remaining_tokens and usage_pct.\n"
            "Exit 0 allowed; 1 not allowed or not recorded; 2 bad command line."
        ),
        epilog="Example:\n  ledger tokens check release-7 builder-1 4000",
    )
    check.add_argument("convoy", metavar="CONVOY", help="the convoy the agent belongs to")
    check.add_argument(
        "agent", metavar="AGENT", help="the agent about to call (a name like CONVOY's)"
    )
    check.add_argument(
        "projected",
        metavar="PROJECTED",
        help="tokens the coming call is expected to use (a whole number, 0 or more)",
    )
    check.set_defaults(handler=tokens_check)
    record = actions.add_parser(
        "record",
        help="record actual use after a call",
        description=(
            "After a call: record the tokens it actually used and settle the reservation\n"
            "made by `ledger tokens check` (unsettled ones expire after\n"
            "usd.reservation_ttl_seconds). Exit 0; 2 bad command line."
        ),
        epilog=(
            "Example:\n"
            "  REF=$(ledger tokens check release-7 builder-1 4000 | jq -r .check_ref)\n"
            '  ledger tokens record release-7 builder-1 3100 650 --check-ref "$REF" \\\n'
            "      --idempotency-key msg-01HZX3"
        ),
    )
    record.add_argument("convoy", metavar="CONVOY", help="the convoy the agent belongs to")
    record.add_argument("agent", metavar="AGENT", help="the agent that made the call")
    record.add_argument("input", metavar="INPUT", help="input tokens the call used (0 or more)")
    record.add_argument(
        "output", metavar="OUTPUT", help="output tokens the call produced (0 or more)"
    )
    record.add_argument(
        "--check-ref",
        metavar="R",
        help="the check_ref printed by `ledger tokens check` (64 hex digits); "
        "settles that reservation",
    )
    record.add_argument(
        "--idempotency-key",
        metavar="K",
        help="repeat-safe key; a second record with the same key writes nothing and prints "
        "the first result with duplicate: true; matches ^[A-Za-z0-9._:-]{1,128}$",
    )
    record.set_defaults(handler=tokens_record)
