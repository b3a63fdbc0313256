"""Pricing a provider's usage object: its token counts and what the call cost.

A record given no cost (``ledger record --usage-json``, ``Ledger.record``)
is priced here from the provider's own usage object.
"""

from typing import Any, NamedTuple

from ledger.core.prices import TokenCounts, applied_kinds, quote_cost_micros
from ledger.core.server_tools import web_searches
from ledger.core.usage_objects import UsageObjectError, usage_reading
from ledger.errors import UsageObjectInvalidError
from ledger.services.gate.prices import PriceDeps, find_price, web_search_fee_micros


class Priced(NamedTuple):
    """A usage object's tokens and, when the model has a price, their cost."""

    tokens: TokenCounts
    actual_micros: int | None
    details: dict[str, Any]
    warning: str | None
    unknown: tuple[str, ...] = ()

    def at_least(self, floor_micros: int) -> tuple[int | None, dict[str, Any], str | None]:
        """Cost, details and warning, the cost raised to ``floor_micros`` (the usage's kept)."""
        if self.actual_micros is None or self.actual_micros >= floor_micros:
            return self.actual_micros, self.details, self.warning
        return floor_micros, {**self.details, "usage_micros": self.actual_micros}, self.warning


def price_usage(
    deps: PriceDeps, provider: str, model: str, usage_object: Any, service_tier: str | None = None
) -> Priced:
    """Token counts and exact cost of a provider's usage object.

    An unpriced model is not an error here: the call happened, so its tokens
    are recorded with ``actual_micros`` null (SPEC §7). The call's service tier
    is the one its usage reports, else ``service_tier`` (the request's). A
    count the product does not know, or a tier the model has no price for, is
    named in ``unknown`` (and the payload's ``unknown_usage``): the record is
    then raised to the call's estimate (``record_call``), never taken as free.

    Raises:
        UsageObjectInvalidError: the usage object is malformed or of another
            provider's shape (exit 2, naming the field).
    """
    try:
        reading = usage_reading(provider, usage_object)
    except UsageObjectError as exc:
        raise UsageObjectInvalidError(f"--usage-json: {exc}") from exc
    tokens, unknown = reading.tokens, list(reading.unknown)
    tier = reading.service_tier or service_tier
    found, why = find_price(deps, provider, model)
    details: dict[str, Any] = {"tokens": tokens.as_payload()}
    if tier is not None:
        details["service_tier"] = tier[:64]
    if found is None:
        reason = f"no price for {provider}/{model}: {why}"
        details.update(price_source=None, rates=None, unpriced_reason=reason[:512])
        unpriced = (
            f"{reason}; recorded with actual_micros null, and verdicts halt until the model "
            "is priced and `ledger rebuild-state` runs"
        )
        return Priced(tokens, None, details, unpriced)
    tiered = found.for_service_tier(tier)
    if tiered is None:
        unknown.append(f"service_tier:{tier}")
        tiered = found
    micros, rates = quote_cost_micros(tokens, tiered)
    details.update(price_source=found.source, rates=rates.as_text(applied_kinds(tokens, rates)))
    searches = web_searches(provider, usage_object)
    if searches:
        # Server-side tool fees are part of what the call cost, beside its tokens.
        fee = web_search_fee_micros(deps, provider, model, searches)
        details.update(web_searches=searches, server_tool_micros=fee)
        micros += fee
    warning: str | None = None
    if unknown:
        details["unknown_usage"] = [name[:128] for name in unknown[:16]]
        warning = (
            f"{provider}/{model}: the usage reports what has no price here "
            f"({', '.join(unknown[:4])}); recorded at the larger of the call's estimate and "
            "what was priced"
        )
    return Priced(tokens, micros, details, warning, tuple(unknown))
