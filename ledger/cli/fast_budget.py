"""Per-call USD commands: ``verdict``, ``record``, ``usage`` (SPEC §3)."""

import argparse
import datetime as dt
import re
from typing import Any

from ledger.cli.output import print_error, print_json
from ledger.errors import EXIT_HALT, UsageError

_PROVIDER_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_REF_RE = re.compile(r"^[0-9a-f]{64}$")
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
    if value is not None and len(value) > _TEXT_MAX:
        raise UsageError(f"{what}: longer than {_TEXT_MAX} characters")
    return value


def _count(value: int | None, what: str) -> int | None:
    if value is not None and value < 0:
        raise UsageError(f"{what}: must be ≥ 0")
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
    outcome = record_call(
        _runtime(home), actual, provider, args.verdict_ref,
        _text(args.model_id, "--model-id"), _text(args.cycle_id, "--cycle-id"),
        _count(args.input_tokens, "--input-tokens"), _count(args.output_tokens, "--output-tokens"),
    )  # fmt: skip
    if outcome.warning:
        print_error(f"warning: {outcome.warning}")
    print_json(
        {
            "recorded": True,
            "entry_hash": outcome.entry_hash,
            "provider": provider,
            "actual_usd": _usd(actual),
            "actual_micros": actual,
            "verdict_ref": args.verdict_ref,
            "settled": outcome.settled,
            "utc_day": outcome.utc_day,
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
    """Add the USD gate's sub-commands."""
    verdict = commands.add_parser("verdict", help="pre-call gate")
    verdict.add_argument("estimate", metavar="EST_USD")
    verdict.add_argument("--provider")
    verdict.add_argument("--cycle-id")
    verdict.add_argument("--agent")
    verdict.set_defaults(handler=verdict_command)

    record = commands.add_parser("record", help="post-call accounting")
    record.add_argument("actual", metavar="ACTUAL_USD")
    record.add_argument("--provider")
    record.add_argument("--verdict-ref")
    record.add_argument("--model-id")
    record.add_argument("--cycle-id")
    record.add_argument("--input-tokens", type=int)
    record.add_argument("--output-tokens", type=int)
    record.set_defaults(handler=record_command)

    usage_parser = commands.add_parser("usage", help="read-only view of today's spend")
    usage_parser.add_argument("--provider")
    usage_parser.set_defaults(handler=usage_command)
