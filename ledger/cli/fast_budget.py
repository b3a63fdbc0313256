"""Per-call USD commands: ``verdict``, ``record``, ``usage`` (SPEC §3)."""

import argparse
import datetime as dt
import re
from typing import Any

from ledger.cli.output import print_error, print_json
from ledger.errors import EXIT_HALT, UsageError

_PROVIDER_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_REF_RE = re.compile(r"^[0-9a-f]{64}$")
IDEMPOTENCY_KEY_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_TEXT_MAX = 256
# RFC 8785 numbers are IEEE-754 doubles: integers beyond 2^53 - 1 cannot be sealed.
MAX_MICROS = 2**53 - 1


def _amount(text: str, what: str) -> int:
    from ledger.core.units import usd_to_micros

    try:
        micros = usd_to_micros(text)
    except ValueError as exc:
        raise UsageError(f"{what}: {exc}") from exc
    if micros < 0 or text.strip().startswith("-"):
        raise UsageError(f"{what}: negative amount {text}")
    if micros > MAX_MICROS:
        raise UsageError(f"{what}: amount too large: {text}")
    return micros


def _provider(value: str | None, *, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise UsageError("--provider is required")
        return None
    if not _PROVIDER_RE.fullmatch(value):
        raise UsageError(f"--provider: {value!r} is not a provider id (^[a-z][a-z0-9_-]{{0,63}}$)")
    return value


def _text(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    if len(value) > _TEXT_MAX:
        raise UsageError(f"{what}: longer than {_TEXT_MAX} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        # argv bytes that are not UTF-8 arrive as lone surrogates: the chain holds UTF-8 only.
        raise UsageError(f"{what}: not valid UTF-8 text") from exc
    return value


def idempotency_key(value: str | None) -> str | None:
    """A checked ``--idempotency-key`` (SPEC §3).

    Raises:
        UsageError: the key does not match ``^[A-Za-z0-9._:-]{1,128}$``.
    """
    if value is not None and not IDEMPOTENCY_KEY_RE.fullmatch(value):
        raise UsageError("--idempotency-key: must match ^[A-Za-z0-9._:-]{1,128}$")
    return value


def _count(value: int | None, what: str) -> int | None:
    if value is not None and value < 0:
        raise UsageError(f"{what}: must be ≥ 0")
    if value is not None and value > MAX_MICROS:
        raise UsageError(f"{what}: larger than the chain can hold (2^53 - 1)")
    return value


def _usd(micros: int | None) -> float | None:
    from ledger.core.units import micros_to_usd

    return None if micros is None else micros_to_usd(micros)


def _age(now: dt.datetime, then: dt.datetime | None) -> float | None:
    return None if then is None else round((now - then).total_seconds(), 3)


def _runtime(home: str | None) -> Any:
    from ledger.runtime import build_runtime

    return build_runtime(home)


def verdict_command(home: str | None, args: argparse.Namespace) -> int:
    """``ledger verdict EST_USD``."""
    from ledger.services.gate import check_verdict

    estimate = _amount(args.estimate, "EST_USD")
    provider = _provider(args.provider)
    if provider == "aggregate":
        provider = None
    outcome = check_verdict(
        _runtime(home), estimate, provider, _text(args.cycle_id, "--cycle-id"),
        _text(args.agent, "--agent"),
    )  # fmt: skip
    decision = outcome.decision
    scope = decision.deciding
    reading = scope.reading
    used, reserved, cap = scope.used_micros, scope.reserved_micros, scope.cap_micros
    projected = decision.projected_pct
    print_json(
        {
            "verdict": decision.verdict.value,
            "verdict_ref": outcome.verdict_ref,
            "usd_used": _usd(used),
            "usd_reserved": _usd(reserved),
            "usd_remaining": _usd(cap - used - reserved),
            "daily_cap_usd": _usd(cap),
            "estimated_usd_for_call": _usd(estimate),
            "usage_pct": None if projected is None else round(float(projected), 4),
            "deciding_cap": scope.key,
            "provider": outcome.provider or "aggregate",
            "utc_day": outcome.utc_day,
            "billing_api_age_seconds": _age(outcome.now, reading.fetched_at if reading else None),
            "counter_age_seconds": _age(outcome.now, scope.last_spend_ts),
            "uncertainty_reason": decision.reason.value if decision.reason else None,
            "diagnostic": decision.diagnostic,
            "usd_used_micros": used,
            "usd_reserved_micros": reserved,
            "daily_cap_micros": cap,
            "estimated_micros": estimate,
        }
    )
    if outcome.recording_error is not None:
        print_error(f"verdict not recorded: {outcome.recording_error}")
    return 0 if decision.admits and outcome.recording_error is None else EXIT_HALT


def record_command(home: str | None, args: argparse.Namespace) -> int:
    """``ledger record ACTUAL_USD --provider P``."""
    from ledger.services.gate import record_call

    actual = _amount(args.actual, "ACTUAL_USD")
    provider = _provider(args.provider, required=True)
    assert provider is not None  # noqa: S101 - required=True
    if args.verdict_ref is not None and not _REF_RE.fullmatch(args.verdict_ref):
        raise UsageError("--verdict-ref: must be a 64-digit lowercase hex hash")
    key = idempotency_key(args.idempotency_key)
    outcome = record_call(
        _runtime(home), actual, provider, args.verdict_ref,
        _text(args.model_id, "--model-id"), _text(args.cycle_id, "--cycle-id"),
        _count(args.input_tokens, "--input-tokens"), _count(args.output_tokens, "--output-tokens"),
        key,
    )  # fmt: skip
    if outcome.warning:
        print_error(f"warning: {outcome.warning}")
    first = outcome.payload or {}
    sealed_micros = first.get("actual_micros", actual)
    print_json(
        {
            "recorded": True,
            "entry_hash": outcome.entry_hash,
            "provider": first.get("provider", provider),
            "actual_usd": _usd(sealed_micros),
            "actual_micros": sealed_micros,
            "verdict_ref": first.get("verdict_ref", args.verdict_ref),
            "settled": outcome.settled,
            "utc_day": outcome.utc_day,
            "idempotency_key": key,
            "duplicate": outcome.duplicate,
        }
    )
    return 0


def usage_command(home: str | None, args: argparse.Namespace) -> int:
    """``ledger usage [--provider P]``."""
    from ledger.services.gate import usage

    provider = _provider(args.provider)
    if provider == "aggregate":
        provider = None
    outcome = usage(_runtime(home), provider)
    scope = outcome.provider_scope or outcome.aggregate
    remaining = []
    if outcome.daily_cap_micros is not None:
        agg = outcome.aggregate
        remaining.append(outcome.daily_cap_micros - agg.used_micros - agg.reserved_micros)
    if outcome.provider_cap_micros is not None and outcome.provider_scope is not None:
        own = outcome.provider_scope
        remaining.append(outcome.provider_cap_micros - own.used_micros - own.reserved_micros)
    reading = scope.reading
    print_json(
        {
            "usd_used": _usd(scope.used_micros),
            "usd_reserved": _usd(scope.reserved_micros),
            "usd_remaining": _usd(min(remaining)) if remaining else None,
            "daily_cap_usd": _usd(outcome.daily_cap_micros),
            "provider_cap_usd": _usd(outcome.provider_cap_micros),
            "provider": provider or "aggregate",
            "utc_day": outcome.utc_day,
            "billing_api_age_seconds": _age(outcome.now, reading.fetched_at if reading else None),
            "counter_age_seconds": _age(outcome.now, scope.last_spend_ts),
            "uncertainty_reason": outcome.uncertainty.value if outcome.uncertainty else None,
            "diagnostic": outcome.diagnostic,
            "usd_used_micros": scope.used_micros,
            "usd_reserved_micros": scope.reserved_micros,
        }
    )
    return 0


def register(commands: Any) -> None:
    """Add the USD gate's sub-commands, each with a sentence per argument and examples."""
    verdict = commands.add_parser(
        "verdict",
        help="pre-call gate",
        description=(
            "Pre-call gate: decide whether a call estimated at EST_USD may go\n"
            "ahead, reserve it, and print one JSON decision (verdict, verdict_ref, usd_used,\n"
            "usd_remaining, deciding_cap, ...).\n"
            "Exit 0 allow or warn-90; 1 halt-100, halt-uncertainty, or the verdict could not\n"
            "be recorded; 2 bad command line; 78 config error."
        ),
        epilog=(
            "Examples:\n"
            "  ledger verdict 0.25 --provider openai --cycle-id run-42 --agent planner\n"
            "  ledger --home ./.ledger verdict 1.50"
        ),
    )
    verdict.add_argument(
        "estimate",
        metavar="EST_USD",
        help="estimated cost of the coming call in US dollars, a decimal like 0.25 (not negative)",
    )
    verdict.add_argument(
        "--provider",
        metavar="P",
        help="provider id (^[a-z][a-z0-9_-]{0,63}$) whose cap also applies; "
        "default: only the aggregate daily cap",
    )
    verdict.add_argument(
        "--cycle-id",
        metavar="C",
        help="the caller's run or cycle id, stored with the verdict (at most 256 characters)",
    )
    verdict.add_argument(
        "--agent",
        metavar="A",
        help="the agent asking, stored with the verdict (at most 256 characters)",
    )
    verdict.set_defaults(handler=verdict_command)

    record = commands.add_parser(
        "record",
        help="post-call accounting",
        description=(
            "Post-call accounting: record what a call actually cost and settle its\n"
            "reservation. Spend is never refused: an unknown, expired or settled\n"
            "--verdict-ref is recorded anyway, with a warning on stderr.\n"
            "Exit 0 recorded (or a duplicate key); 2 bad command line; 74 I/O failure;\n"
            "75 lock timeout; 78 config error."
        ),
        epilog=(
            "Example:\n"
            "  REF=$(ledger verdict 0.25 --provider openai | jq -r .verdict_ref)\n"
            '  ledger record 0.21 --provider openai --verdict-ref "$REF" \\\n'
            "      --model-id gpt-4o --input-tokens 1200 --output-tokens 300 \\\n"
            "      --idempotency-key call-7f3a"
        ),
    )
    record.add_argument(
        "actual",
        metavar="ACTUAL_USD",
        help="what the call actually cost in US dollars, a decimal like 0.21 (not negative)",
    )
    record.add_argument(
        "--provider",
        metavar="P",
        help="provider id the spend counts against (^[a-z][a-z0-9_-]{0,63}$); required",
    )
    record.add_argument(
        "--verdict-ref",
        metavar="R",
        help="the verdict_ref printed by `ledger verdict` (64 hex digits); "
        "settles that reservation",
    )
    record.add_argument(
        "--model-id",
        metavar="M",
        help="the model the call used, stored with the spend (at most 256 characters)",
    )
    record.add_argument(
        "--cycle-id",
        metavar="C",
        help="the caller's run or cycle id, stored with the spend (at most 256 characters)",
    )
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
        help="repeat-safe key; a second record with the same key writes nothing and prints "
        "the first result with duplicate: true; matches ^[A-Za-z0-9._:-]{1,128}$",
    )
    record.set_defaults(handler=record_command)

    usage_parser = commands.add_parser(
        "usage",
        help="read-only view of today's spend",
        description=(
            "Read-only view of today's (UTC) spend: used, reserved and remaining dollars\n"
            "against the daily cap, and any active uncertainty. Writes nothing.\n"
            "Exit 0; 2 bad command line; 78 config error."
        ),
        epilog="Examples:\n  ledger usage\n  ledger usage --provider anthropic",
    )
    usage_parser.add_argument(
        "--provider",
        metavar="P",
        help="show this provider's scope and cap as well (^[a-z][a-z0-9_-]{0,63}$); "
        "default: the aggregate",
    )
    usage_parser.set_defaults(handler=usage_command)
