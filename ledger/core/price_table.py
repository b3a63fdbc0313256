"""The price snapshot's files read (``prices/<provider>.json`` in the home), as pure functions.

Per provider: the models with genai-prices' own match rules (equals,
starts_with, ends_with, contains, regex, and, or), their rates as decimal text
(every kind the library has), their long-context tiers and their prices for
request contexts (service tiers, batch). ``quote`` finds a model's rates: an
operator's override wins over the library.
"""

import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from ledger.core.prices import (
    CONFIG_SOURCE,
    SNAPSHOT_FORMAT,
    PriceError,
    Quote,
    Rates,
    Tier,
    Variant,
)
from ledger.core.rate_tables import rates_from

_MAX_DEPTH = 32


def match(clause: Any, text: str, depth: int = 0) -> bool:
    """Whether a genai-prices match clause accepts ``text`` (a lower-cased model name).

    Raises:
        PriceError: a clause this format does not know.
    """
    if depth > _MAX_DEPTH or not isinstance(clause, dict) or len(clause) != 1:
        raise PriceError("malformed match clause")
    ((kind, value),) = clause.items()
    if kind in {"or", "and"}:
        if not isinstance(value, list):
            raise PriceError("malformed match clause")
        results = (match(inner, text, depth + 1) for inner in value)
        return any(results) if kind == "or" else all(results)
    if not isinstance(value, str):
        raise PriceError("malformed match clause")
    if kind == "equals":
        return text == value.lower()
    if kind == "starts_with":
        return text.startswith(value.lower())
    if kind == "ends_with":
        return text.endswith(value.lower())
    if kind == "contains":
        return value.lower() in text
    if kind == "regex":
        return re.search(value, text) is not None
    raise PriceError(f"unknown match clause {kind!r}")


class ProviderPrices(NamedTuple):
    """One provider's part of the price snapshot: models in match order, fallbacks."""

    source: str
    fallback: tuple[str, ...]
    models: list[Any]


ProviderLoader = Callable[[str], "ProviderPrices | None"]


def parse_provider_file(raw: bytes, provider: str) -> ProviderPrices:
    """Parse one provider's file of the price snapshot (``prices/<provider>.json``).

    Raises:
        PriceError: not a price snapshot file of this format, or another provider's.
    """
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PriceError(f"price snapshot for {provider} is not JSON ({exc})") from exc
    if not isinstance(document, dict) or document.get("format") != SNAPSHOT_FORMAT:
        raise PriceError(f"price snapshot for {provider} is not in format {SNAPSHOT_FORMAT}")
    source, models = document.get("source"), document.get("models")
    fallback = document.get("fallback") or []
    if (
        document.get("provider") != provider
        or not isinstance(source, str)
        or not isinstance(models, list)
        or not isinstance(fallback, list)
        or not all(isinstance(name, str) for name in fallback)
    ):
        raise PriceError(f"price snapshot for {provider} is malformed")
    return ProviderPrices(source, tuple(fallback), models)


def find_model_entry(
    load: ProviderLoader, provider: str, model: str
) -> tuple[dict[str, Any], str] | None:
    """The snapshot's entry for ``model`` and its source, or ``None``.

    The provider's own models are tried first, in the library's order, then the
    providers it falls back to (one step), as genai-prices does.

    Raises:
        PriceError: the snapshot's file for a provider is malformed.
    """
    text = model.lower()
    own = load(provider)
    if own is None:
        return None
    found, source = _match_models(own.models, text), own.source
    if found is None:
        for other in own.fallback:
            inner = load(other)
            if inner is not None:
                found, source = _match_models(inner.models, text), inner.source
                if found is not None:
                    break
    return None if found is None else (found, source)


def find_model(
    load: ProviderLoader, provider: str, model: str
) -> tuple[str, Rates, str, tuple[Tier, ...], tuple[Variant, ...]] | None:
    """The library's model id, base rates, source and tiers for ``model``, or ``None``.

    Raises:
        PriceError: the snapshot's file for a provider is malformed.
    """
    entry = find_model_entry(load, provider, model)
    if entry is None:
        return None
    found, source = entry
    model_id = str(found["id"])
    rates = found.get("rates")
    if not isinstance(rates, dict):
        raise PriceError(f"price snapshot: {provider}/{model_id} has no rates")
    prefix = f"{provider}/{model_id}."
    base = rates_from(rates, prefix=prefix, extra=True)
    return model_id, base, source, _tiers(found, prefix), _variants(found, prefix)


def _variants(model: dict[str, Any], prefix: str) -> tuple[Variant, ...]:
    """A model's prices for request contexts (service tiers, batch).

    Raises:
        PriceError: a malformed variant.
    """
    raw = model.get("variants") or []
    if not isinstance(raw, list):
        raise PriceError(f"{prefix}variants: must be a list")
    found = []
    for index, variant in enumerate(raw):
        where = f"{prefix}variants[{index}]."
        when = variant.get("when") if isinstance(variant, dict) else None
        rates = variant.get("rates") if isinstance(variant, dict) else None
        if not isinstance(when, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in when.items()
        ):
            raise PriceError(f"{where}when: must be an object of strings")
        if not isinstance(rates, dict):
            raise PriceError(f"{where}rates: must be an object")
        context = tuple(sorted(when.items()))
        found.append(Variant(context, rates_from(rates, prefix=where, extra=True),
                             _tiers(variant, where)))  # fmt: skip
    return tuple(found)


def _tiers(model: dict[str, Any], prefix: str) -> tuple[Tier, ...]:
    """A model's tiers: each with a threshold and a full set of rates, ascending.

    Raises:
        PriceError: a malformed tier.
    """
    raw = model.get("tiers") or []
    if not isinstance(raw, list):
        raise PriceError(f"{prefix}tiers: must be a list")
    tiers: list[Tier] = []
    for index, tier in enumerate(raw):
        where = f"{prefix}tiers[{index}]."
        above = tier.get("above") if isinstance(tier, dict) else None
        if isinstance(above, bool) or not isinstance(above, int) or above < 0:
            raise PriceError(f"{where}above: must be an integer ≥ 0")
        if tiers and above <= tiers[-1].above:
            raise PriceError(f"{where}above: tiers must ascend")
        rates = tier.get("rates")
        if not isinstance(rates, dict):
            raise PriceError(f"{where}rates: must be an object")
        tiers.append(Tier(above, rates_from(rates, prefix=where, extra=True)))
    return tuple(tiers)


def _match_models(models: list[Any], text: str) -> dict[str, Any] | None:
    for candidate in models:
        if isinstance(candidate, dict) and match(candidate.get("match"), text):
            return candidate
    return None


def quote(
    provider: str,
    model: str,
    overrides: dict[str, Rates],
    load: ProviderLoader,
) -> Quote | None:
    """The rates for ``provider/model``: an operator override wins over the library.

    An override applies to the exact model name, or to the library's model id
    the name matches (so ``claude-opus-4-1`` also prices ``claude-opus-4-1-20250805``).

    Raises:
        PriceError: the snapshot is malformed.
    """
    own = overrides.get(f"{provider}/{model}")
    if own is not None:
        return Quote(provider, model, own, CONFIG_SOURCE)
    found = find_model(load, provider, model)
    if found is None:
        return None
    model_id, rates, source, tiers, variants = found
    by_id = overrides.get(f"{provider}/{model_id}")
    if by_id is not None:
        return Quote(provider, model, by_id, CONFIG_SOURCE)  # an override is one flat price
    return Quote(provider, model, rates, source, tiers, variants)
