"""Per-call USD commands: ``verdict``, ``record``, ``usage`` (SPEC §3, §7).

Arguments are checked and answered by ``ledger.services.gate.calls``, the code the
Python API runs too; this module parses argv, reads ``--usage-json -`` from
stdin and prints.
"""

import argparse
import json
import sys
from typing import Any

from ledger.cli.output import print_error, print_json
from ledger.errors import EXIT_HALT, UsageError

_USAGE_JSON_MAX = 1 << 20


def idempotency_key(value: str | None) -> str | None:
    """A checked ``--idempotency-key`` (SPEC §3).

    Raises:
        UsageError: the key does not match ``^[A-Za-z0-9._:-]{1,128}$``.
    """
    from ledger.services.gate.call_args import idempotency_key as checked

    return checked(value)


def _runtime(home: str | None) -> Any:
    from ledger.runtime import build_runtime

    return build_runtime(home)


def session_id(args: argparse.Namespace) -> str | None:
    """``--session`` or ``--cycle-id``: two names for the same value.

    Raises:
        UsageError: both are given, with different values.
    """
    if args.session is not None and args.cycle_id is not None and args.session != args.cycle_id:
        raise UsageError("--session and --cycle-id name different sessions; give one")
    chosen: str | None = args.session if args.session is not None else args.cycle_id
    return chosen


def _session_option(parser: Any, what: str) -> None:
    """``--cycle-id`` and its other name ``--session``."""
    parser.add_argument(
        "--cycle-id",
        metavar="C",
        help=f"the caller's run, cycle or session id, stored with the {what} "
        "(printable, at most 128 characters); the same as --session",
    )
    parser.add_argument(
        "--session",
        metavar="S",
        help="the session id, for budgets counted per session (the same as --cycle-id)",
    )


def verdict_command(home: str | None, args: argparse.Namespace) -> int:
    """``ledger verdict [EST_USD] [--model M --input-tokens N --max-output-tokens K]``."""
    from ledger.services.gate.calls import verdict

    document, admitted = verdict(
        _runtime(home), args.estimate, args.provider, model=args.model,
        input_tokens=args.input_tokens, max_output_tokens=args.max_output_tokens,
        cycle_id=session_id(args), agent=args.agent, tags=args.tag, gateway_key=args.key,
    )  # fmt: skip
    recording_error = document.pop("recording_error", None)
    print_json(document)
    if recording_error is not None:
        print_error(f"verdict not recorded: {recording_error}")
    return 0 if admitted else EXIT_HALT


def _usage_json(value: str | None) -> Any:
    if value is None:
        return None
    text = sys.stdin.read(_USAGE_JSON_MAX + 1) if value == "-" else value
    if len(text) > _USAGE_JSON_MAX:
        raise UsageError("--usage-json: larger than 1 MiB")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--usage-json: not JSON ({exc})") from exc


def record_command(home: str | None, args: argparse.Namespace) -> int:
    """``ledger record [ACTUAL_USD] --provider P [--model M --usage-json JSON|-]``."""
    from ledger.services.gate.calls import record

    if args.model is not None and args.model_id is not None and args.model != args.model_id:
        raise UsageError("--model and --model-id name different models")
    document, warning = record(
        _runtime(home), args.actual, args.provider, verdict_ref=args.verdict_ref,
        model=args.model or args.model_id, cycle_id=session_id(args),
        input_tokens=args.input_tokens, output_tokens=args.output_tokens,
        idempotency_key_value=args.idempotency_key, usage_object=_usage_json(args.usage_json),
        agent=args.agent, tags=args.tag, gateway_key=args.key, same_record_only=True,
    )  # fmt: skip
    if warning:
        print_error(f"warning: {warning}")
    print_json(document)
    return 0


def usage_command(home: str | None, args: argparse.Namespace) -> int:
    """``ledger usage [--provider P]``."""
    from ledger.services.gate.calls import usage_view

    if args.budget is not None:
        from ledger.services.gate.budget_views import budget_rows

        if args.provider is not None:
            raise UsageError("give --provider or --budget, not both")
        print_json(budget_rows(_runtime(home), args.budget))
        return 0
    print_json(usage_view(_runtime(home), args.provider))
    return 0


def _scope_options(parser: Any, what: str) -> None:
    """``--tag`` and ``--key``: what budgets' ``match`` and ``per`` see besides the flags above."""
    parser.add_argument(
        "--tag",
        action="append",
        metavar="T",
        help=f"a tag stored with the {what}, for budgets that match tags; repeat it for more "
        "(each ^[A-Za-z0-9._:/@+-]{1,64}$, at most 32)",
    )
    parser.add_argument(
        "--key",
        metavar="NAME",
        help=f"the gateway key (by name) the {what} is made under, for budgets that match or "
        "count per key",
    )


def register(commands: Any) -> None:
    """Add the USD gate's sub-commands, each with a sentence per argument and examples."""
    verdict = commands.add_parser(
        "verdict",
        help="pre-call gate",
        description=(
            "Pre-call gate: decide whether a call estimated at EST_USD (or priced from\n"
            "--model, --input-tokens and --max-output-tokens) may go ahead, reserve it, and\n"
            "print one JSON decision (verdict, verdict_ref, usd_used, usd_remaining,\n"
            "deciding_cap, ...; model and price_source when priced from tokens).\n"
            "Exit 0 allow or warn-90; 1 halt-100, halt-uncertainty, or the verdict could not\n"
            "be recorded; 2 bad command line or a model with no price; 78 config error."
        ),
        epilog=(
            "Examples:\n"
            "  ledger verdict 0.25 --provider openai --session run-42 --agent planner\n"
            "  ledger verdict --provider anthropic --model claude-sonnet-4-5 \\\n"
            "      --input-tokens 1200 --max-output-tokens 800\n"
            "  ledger --home ./.ledger verdict 1.50"
        ),
    )
    verdict.add_argument(
        "estimate",
        metavar="EST_USD",
        nargs="?",
        help="estimated cost of the coming call in US dollars, a decimal like 0.25 (not negative); "
        "leave it out to price --input-tokens and --max-output-tokens of --model",
    )
    verdict.add_argument(
        "--model",
        metavar="M",
        help="the model the call will use; with the token flags and no EST_USD, the estimate "
        "is its price (`ledger prices show M`)",
    )
    verdict.add_argument(
        "--input-tokens",
        type=int,
        metavar="N",
        help="input tokens the call will send (0 or more)",
    )
    verdict.add_argument(
        "--max-output-tokens",
        type=int,
        metavar="K",
        help="the most output tokens the call may produce (its max_tokens), so the estimate "
        "is an upper bound",
    )
    verdict.add_argument(
        "--provider",
        metavar="P",
        help="provider id (^[a-z][a-z0-9_-]{0,63}$) whose cap also applies; "
        "default: only the aggregate daily cap",
    )
    _session_option(verdict, "verdict")
    verdict.add_argument(
        "--agent",
        metavar="A",
        help="the agent asking, stored with the verdict (printable, at most 128 characters)",
    )
    _scope_options(verdict, "verdict")
    verdict.set_defaults(handler=verdict_command)

    record = commands.add_parser(
        "record",
        help="post-call accounting",
        description=(
            "Post-call accounting: record what a call actually cost and settle its\n"
            "reservation. Spend is never refused: an unknown, expired or settled\n"
            "--verdict-ref is recorded anyway, with a warning on stderr.\n"
            "Without ACTUAL_USD the cost is computed from --usage-json, each token at its own\n"
            "rate; a model with no price is recorded with actual_micros null (a warning on\n"
            "stderr) and verdicts halt until it is priced.\n"
            "Exit 0 recorded (or the same record again under its key); 2 bad command line,\n"
            "usage object, or a key first used for another record;\n"
            "74 I/O failure; 75 lock timeout; 78 config error."
        ),
        epilog=(
            "Example:\n"
            "  REF=$(ledger verdict 0.25 --provider openai | jq -r .verdict_ref)\n"
            '  ledger record 0.21 --provider openai --verdict-ref "$REF" \\\n'
            "      --model-id gpt-4o --input-tokens 1200 --output-tokens 300 \\\n"
            "      --idempotency-key call-7f3a\n"
            "  ledger record --provider anthropic --model claude-sonnet-4-5 \\\n"
            '      --usage-json \'{"input_tokens": 1200, "output_tokens": 310}\''
        ),
    )
    record.add_argument(
        "actual",
        metavar="ACTUAL_USD",
        nargs="?",
        help="what the call actually cost in US dollars, a decimal like 0.21 (not negative); "
        "leave it out to price --usage-json at --model's price",
    )
    record.add_argument(
        "--model",
        metavar="M",
        help="the model the call used (the same as --model-id); prices --usage-json",
    )
    record.add_argument(
        "--usage-json",
        metavar="JSON",
        help="the provider's own usage object (anthropic Messages, openai Chat Completions "
        "or Responses) as JSON, or - to read it from stdin",
    )
    record.add_argument(
        "--provider",
        metavar="P",
        help="provider id the spend counts against (^[a-z][a-z0-9_-]{0,63}$); required",
    )
    record.add_argument(
        "--verdict-ref",
        metavar="R",
        help="the verdict_ref printed by `ledger verdict` (64 hex digits, or a prefix of "
        "12 or more that names one open reservation); settles that reservation",
    )
    record.add_argument(
        "--model-id",
        metavar="M",
        help="the model the call used, stored with the spend (at most 256 characters)",
    )
    _session_option(record, "spend")
    record.add_argument(
        "--input-tokens",
        type=int,
        metavar="N",
        help="input tokens the call used, stored with the spend (0 or more)",
    )
    record.add_argument(
        "--output-tokens",
        type=int,
        metavar="N",
        help="output tokens the call produced, stored with the spend (0 or more)",
    )
    record.add_argument(
        "--idempotency-key",
        metavar="K",
        help="repeat-safe key, one per call; the same record again with the same key writes "
        "nothing and prints the first result with duplicate: true, another record (amount, "
        "provider or model) under it is refused (exit 2); matches ^[A-Za-z0-9._:-]{1,128}$",
    )
    record.add_argument(
        "--agent",
        metavar="A",
        help="the agent that made the call, stored with the spend (printable, at most 128 "
        "characters); "
        "budgets matching agents count it when no live reservation names its scope",
    )
    _scope_options(record, "spend")
    record.set_defaults(handler=record_command)

    usage_parser = commands.add_parser(
        "usage",
        help="read-only view of today's spend",
        description=(
            "Read-only view of today's (UTC) spend: used, reserved and remaining dollars\n"
            "against the daily cap, and any active uncertainty. Writes nothing.\n"
            "Exit 0; 2 bad command line; 78 config error."
        ),
        epilog=(
            "Examples:\n  ledger usage\n  ledger usage --provider anthropic\n"
            "  ledger usage --budget research-monthly"
        ),
    )
    usage_parser.add_argument(
        "--provider",
        metavar="P",
        help="show this provider's scope and cap as well (^[a-z][a-z0-9_-]{0,63}$); "
        "default: the aggregate",
    )
    usage_parser.add_argument(
        "--budget",
        metavar="NAME",
        help="show this [[budgets]] entry instead: its current period, used, reserved, cap "
        "and %% (one row per value of its per key)",
    )
    usage_parser.set_defaults(handler=usage_command)
