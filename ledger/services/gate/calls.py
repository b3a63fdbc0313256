"""The per-call requests, checked and answered in one place for the CLI and the Python API.

``ledger verdict``, ``record`` and ``usage`` on the command line and
``Ledger.verdict``, ``record`` and ``usage`` in Python check their arguments
here, call the gate, and get back the same JSON document (SPEC §3, §7), so
the two can never drift apart.
"""

import datetime as dt
from typing import Any, Protocol

from ledger.core.ids import checked_id
from ledger.core.output_fit import OutputFit
from ledger.core.prices import Quote, quote_estimate_micros
from ledger.core.refs import MIN_REF_PREFIX, REF_PREFIX_RE
from ledger.core.request_pricing import RequestPricing
from ledger.core.usage_objects import UsageObjectError, usage_tokens
from ledger.errors import UnknownPriceError, UsageError, UsageObjectInvalidError
from ledger.services.gate.budget_views import budgets_document, key_name, tag_list, usd
from ledger.services.gate.call_args import (
    MAX_MICROS,
    REF_RE,
    amount,
    count,
    idempotency_key,
    provider_id,
    text_arg,
)
from ledger.services.gate.deps import GateDeps
from ledger.services.gate.figures import usage
from ledger.services.gate.gate import check_verdict
from ledger.services.gate.prices import PriceDeps, find_price, price_for
from ledger.services.gate.providers import ProviderDeps, require_known_provider, unknown_provider
from ledger.services.gate.recording import record_call
from ledger.services.gate.usage_pricing import price_usage

# Providers tried, in order, when a model is priced without --provider.
INFERRED_PROVIDERS = ("anthropic", "openai")


class CallDeps(GateDeps, PriceDeps, ProviderDeps, Protocol):
    """What a per-call request needs: the gate, the price table and the known providers."""


def _scope_details(agent: object, tags: object, key: object) -> dict[str, Any]:
    """A record's scope for budgets, sealed only when given."""
    details: dict[str, Any] = {}
    if agent is not None:
        details["agent"] = checked_id(agent, "--agent")
    if tags:
        details["tags"] = list(tag_list(tags))
    if key is not None:
        details["key"] = key_name(key)
    return details


def _recorded_by(path: str | None, key: str | None) -> dict[str, str]:
    """The path that records responses under their ids, sealed with a keyed record."""
    if path not in {None, "gateway", "sdk"}:
        raise UsageError('recorded_by: must be "gateway" or "sdk"')
    return {} if path is None or key is None else {"recorded_by": path}


def _age(now: dt.datetime, then: dt.datetime | None) -> float | None:
    return None if then is None else round((now - then).total_seconds(), 3)


def _quote(deps: CallDeps, provider: str | None, model: str) -> Quote:
    if provider is not None:
        return price_for(deps, provider, model)
    for candidate in INFERRED_PROVIDERS:
        found, _why = find_price(deps, candidate, model)
        if found is not None:
            return found
    raise UnknownPriceError(
        f"no price for {model}: not priced for any of {', '.join(INFERRED_PROVIDERS)}; "
        "name its provider with --provider"
    )


def _checked_estimate(micros: int) -> int:
    if micros > MAX_MICROS:
        raise UsageError("estimate: amount too large")
    return micros


def _priced_estimate(
    found: Quote, inputs: int, max_outputs: int, pricing: RequestPricing | None
) -> tuple[Quote, int]:
    """The quote a request is estimated at and its estimate (the dearest that may apply)."""
    if pricing is None:
        return found, quote_estimate_micros(inputs, max_outputs, found)[0]
    tiered = found.for_service_tier(pricing.service_tier)
    candidates = (tiered,) if tiered is not None else found.every_tier()
    best = max(
        (
            quote_estimate_micros(
                inputs, max_outputs, candidate, input_labels=pricing.input_modalities,
                output_labels=pricing.output_modalities,
            )[0],
            index,
        )
        for index, candidate in enumerate(candidates)
    )  # fmt: skip
    return candidates[best[1]], best[0]


def verdict(
    deps: CallDeps,
    estimate: object = None,
    provider: object = None,
    *,
    model: object = None,
    input_tokens: object = None,
    max_output_tokens: object = None,
    cycle_id: object = None,
    agent: object = None,
    tags: object = None,
    gateway_key: object = None,
    min_output_tokens: int | None = None,
    output_step: int = 1,
    forwarded: bool = False,
    server_tool_micros: int = 0,
    client: str | None = None,
    pricing: RequestPricing | None = None,
) -> tuple[dict[str, Any], bool]:
    """Check and run one pre-call verdict; returns its JSON document and whether it admits.

    Without ``estimate``, the estimate is the price of ``input_tokens`` input
    and ``max_output_tokens`` output tokens of ``model`` (an upper bound).
    With ``min_output_tokens`` too, a call that does not fit is admitted with
    the largest output limit that fits, down to that many tokens (a multiple
    of ``output_step``); the document's ``clamped_output_tokens`` names it.
    ``forwarded``: the request is sent as soon as it is admitted (the gateway),
    so its reservation is charged at its estimate if it expires unrecorded.
    ``server_tool_micros``: the most its server-side tools (web search) may
    cost, added to the token estimate. ``client``: the program that made the
    call (``core.clients``), sealed with the verdict for budgets and reports.
    ``pricing``: what the request asks for
    beside text (audio or image output, audio input, a service tier): the
    estimate prices each side at the dearest rate that may apply, at the
    tier's rates (every tier's, the dearest, for a tier the model has no price for).

    Raises:
        UsageError: a bad argument, or (``UnknownPriceError``) an unpriced model;
            nothing is reserved or written then.
        ConfigError: the configuration is invalid or has no daily cap.
    """
    name = provider_id(provider)
    require_known_provider(deps, name)
    model_name = text_arg(model, "--model")
    call_tags, call_key = tag_list(tags), key_name(gateway_key)
    inputs = count(input_tokens, "--input-tokens")
    max_outputs = count(max_output_tokens, "--max-output-tokens")
    details: dict[str, Any] = {}
    fit = None
    if estimate is not None:
        micros = amount(estimate, "EST_USD")
        if model_name is not None:
            details = {"model": model_name, "price_source": None}
    else:
        if model_name is None or inputs is None or max_outputs is None:
            raise UsageError("give EST_USD, or --model with --input-tokens and --max-output-tokens")
        found = _quote(deps, None if name == "aggregate" else name, model_name)
        if name is None:
            name = found.provider
        found, micros = _priced_estimate(found, inputs, max_outputs, pricing)
        micros = _checked_estimate(micros + server_tool_micros)
        details = {"model": model_name, "price_source": found.source}
        # The clamp prices output as text: an audio or image answer is not clamped.
        if min_output_tokens is not None and not (pricing and pricing.output_modalities):
            fit = OutputFit(
                inputs, max_outputs, min_output_tokens, found, output_step, server_tool_micros
            )
    if details:
        details["input_tokens"] = inputs
        details["max_output_tokens"] = max_outputs
        if server_tool_micros:
            details["server_tool_micros"] = server_tool_micros
    if name == "aggregate":
        name = None
    outcome = check_verdict(
        deps, micros, name, checked_id(cycle_id, "--cycle-id"), checked_id(agent, "--agent"),
        details={**details, "client": client} if client else details or None,
        tags=call_tags, key=call_key, fit=fit, forwarded=forwarded,
    )  # fmt: skip
    decision = outcome.decision
    micros = decision.estimate_micros
    scope = decision.deciding
    reading = scope.reading
    used, reserved, cap = scope.used_micros, scope.reserved_micros, scope.cap_micros
    projected = decision.projected_pct
    document: dict[str, Any] = {
        "verdict": decision.verdict.value,
        "verdict_ref": outcome.verdict_ref,
        "usd_used": usd(used),
        "usd_reserved": usd(reserved),
        "usd_remaining": usd(cap - used - reserved),
        "daily_cap_usd": usd(cap),
        "estimated_usd_for_call": usd(micros),
        "usage_pct": None if projected is None else round(float(projected), 4),
        "deciding_cap": scope.key,
        "provider": outcome.provider or "aggregate",
        "utc_day": outcome.utc_day,
        "budget_day": outcome.budget_day,
        "billing_api_age_seconds": _age(outcome.now, reading.fetched_at if reading else None),
        "counter_age_seconds": _age(outcome.now, scope.last_spend_ts),
        "uncertainty_reason": decision.reason.value if decision.reason else None,
        "diagnostic": decision.diagnostic,
        "usd_used_micros": used,
        "usd_reserved_micros": reserved,
        "daily_cap_micros": cap,
        "estimated_micros": micros,
    }
    if details:
        document["model"] = details["model"]
        document["price_source"] = details["price_source"]
    if pricing is not None and pricing.service_tier is not None:
        # The record prices the call at this tier when its answer does not name one.
        document["service_tier"] = pricing.service_tier
    if outcome.clamped_output_tokens is not None:
        document["clamped_output_tokens"] = outcome.clamped_output_tokens
    if deps.config.budgets:
        # Only homes that define budgets print the list (empty when none applies).
        document["budgets"] = budgets_document(outcome.budgets, micros)
    if outcome.recording_error is not None:
        document["recording_error"] = outcome.recording_error
    return document, decision.admits and outcome.recording_error is None


def record(
    deps: CallDeps,
    actual: object = None,
    provider: str | None = None,
    *,
    verdict_ref: object = None,
    model: object = None,
    cycle_id: object = None,
    input_tokens: object = None,
    output_tokens: object = None,
    idempotency_key_value: object = None,
    usage_object: Any = None,
    agent: object = None,
    tags: object = None,
    gateway_key: object = None,
    same_record_only: bool = False,
    floor_micros: int = 0,
    recorded_by: str | None = None,
    service_tier: str | None = None,
) -> tuple[dict[str, Any], str | None]:
    """Check and seal one record; returns its JSON document and a warning for stderr.

    Without ``actual``, the cost is computed from ``usage_object`` (the
    provider's own usage object) at ``model``'s price, and is never less than
    ``floor_micros`` (a call cut before its final usage arrived). ``same_record_only``:
    a caller's own idempotency key first sealed for another provider, amount
    or model is refused rather than answered as a duplicate (paths that seal
    a provider's response under its id leave it off: another path may have
    sealed the same response at its own figure).

    Raises:
        UsageError: a bad argument or usage object, found before anything is written.
        LockTimeoutError, ChainIOError: the chain cannot be appended to.
    """
    name = provider_id(provider, required=True)
    assert name is not None  # noqa: S101 - required=True
    unknown = unknown_provider(deps, name)
    ref = None
    if verdict_ref is not None:
        if not isinstance(verdict_ref, str) or not (
            REF_RE.fullmatch(verdict_ref) or REF_PREFIX_RE.fullmatch(verdict_ref)
        ):
            raise UsageError(
                "--verdict-ref: must be a verdict_ref (64 lowercase hex digits) or a prefix "
                f"of {MIN_REF_PREFIX} or more of them"
            )
        ref = verdict_ref
    key = idempotency_key(idempotency_key_value)
    model_name = text_arg(model, "--model")
    input_count = count(input_tokens, "--input-tokens")
    output_count = count(output_tokens, "--output-tokens")
    details: dict[str, Any] = {}
    warning = None
    if actual is not None:
        micros: int | None = amount(actual, "ACTUAL_USD")
        if usage_object is not None:
            try:
                details["tokens"] = usage_tokens(name, usage_object).as_payload()
            except UsageObjectError as exc:
                raise UsageObjectInvalidError(f"--usage-json: {exc}") from exc
    else:
        if model_name is None or usage_object is None:
            raise UsageError("give ACTUAL_USD, or --model with --usage-json")
        priced = price_usage(deps, name, model_name, usage_object, service_tier)
        micros, details, warning = priced.at_least(floor_micros)
        tokens = priced.tokens
        input_count = tokens.input + tokens.cache_write_5m + tokens.cache_write_1h
        input_count += tokens.cache_read
        output_count = tokens.output
    details.update(_scope_details(agent, tags, gateway_key))
    details.update(_recorded_by(recorded_by, key))
    outcome = record_call(
        deps, micros, name, ref, model_name, checked_id(cycle_id, "--cycle-id"),
        input_count, output_count, key, details=details or None,
        same_record_only=same_record_only,
    )  # fmt: skip
    first = outcome.payload or {}
    sealed = first.get("actual_micros", micros)
    document: dict[str, Any] = {
        "recorded": True,
        "entry_hash": outcome.entry_hash,
        "provider": first.get("provider", name),
        "actual_usd": usd(sealed),
        "actual_micros": sealed,
        "verdict_ref": first.get("verdict_ref", ref),
        "settled": outcome.settled,
        "utc_day": outcome.utc_day,
        "budget_day": outcome.budget_day,
        "idempotency_key": first.get("idempotency_key", key),
        "duplicate": outcome.duplicate,
    }
    if "tokens" in first or "price_source" in first:
        document["model"] = first.get("model_id")
        document["price_source"] = first.get("price_source")
        document["tokens"] = first.get("tokens")
    if outcome.duplicate:
        warning = None
    if outcome.spooled:
        # SPEC §8: kept in the home until the store answers; sealed then, once, by its key.
        document.update(entry_hash=None, idempotency_key=first.get("idempotency_key"), spooled=True)
    if outcome.duplicate:
        unknown = None
    if unknown is not None:
        unknown = f"--provider: {unknown} (recorded anyway: spend is never refused)"
    warnings = [text for text in (outcome.warning, warning, unknown) if text]
    return document, "; ".join(warnings) or None


def usage_view(deps: GateDeps, provider: object = None) -> dict[str, Any]:
    """Today's figures as the JSON document ``ledger usage`` prints (writes nothing).

    Raises:
        UsageError: a bad provider id.
        ConfigError: the configuration is invalid.
    """
    name = provider_id(provider)
    if name == "aggregate":
        name = None
    outcome = usage(deps, name)
    scope = outcome.provider_scope or outcome.aggregate
    remaining = []
    if outcome.daily_cap_micros is not None:
        agg = outcome.aggregate
        remaining.append(outcome.daily_cap_micros - agg.used_micros - agg.reserved_micros)
    if outcome.provider_cap_micros is not None and outcome.provider_scope is not None:
        own = outcome.provider_scope
        remaining.append(outcome.provider_cap_micros - own.used_micros - own.reserved_micros)
    reading = scope.reading
    return {
        "usd_used": usd(scope.used_micros),
        "usd_reserved": usd(scope.reserved_micros),
        "usd_remaining": usd(min(remaining)) if remaining else None,
        "daily_cap_usd": usd(outcome.daily_cap_micros),
        "provider_cap_usd": usd(outcome.provider_cap_micros),
        "provider": name or "aggregate",
        "utc_day": outcome.utc_day,
        "budget_day": outcome.budget_day,
        "billing_api_age_seconds": _age(outcome.now, reading.fetched_at if reading else None),
        "counter_age_seconds": _age(outcome.now, scope.last_spend_ts),
        "uncertainty_reason": outcome.uncertainty.value if outcome.uncertainty else None,
        "diagnostic": outcome.diagnostic,
        "usd_used_micros": scope.used_micros,
        "usd_reserved_micros": scope.reserved_micros,
    }
