"""genai-prices as a compact price snapshot: the only module that imports it.

genai-prices imports pydantic and httpx (about 200 ms), so the per-call
commands never import it: ``ledger init`` and ``ledger prices sync`` write the
rates it ships into ``prices/<provider>.json`` in the home, and ``verdict``/``record``
read the one file of the provider they price
(``ledger.core.price_table.parse_provider_file``). Nothing is fetched
over the network: the data is the one bundled with the installed package.

For each model the snapshot keeps the library's match rules and every rate it
has in effect at the moment of the sync — text, audio, image and video tokens
in and out, cache reads, cache writes of each lifetime, reasoning, and the
rates of other units (per request, per page, per 1,000 searches) — nothing
the library ships is dropped. Conditional prices (a price that starts on a
date, off-peak hours) are resolved at that moment. Tiered prices (a higher
rate above 200k input tokens) become the model's ``tiers``: one entry per
threshold any of its rates has, each with the full set of rates in effect
above it, so a reader picks one tier and prices every token of a call at it.
The prices of a request context (``service_tier`` ``priority`` / ``flex``,
``processing: batch``) become the model's ``variants``, each a full set of
rates and tiers as the library resolves it for that context. Models without
an input and an output token price (embeddings, speech, image-only models)
are left out, so they are unpriced.
"""

import dataclasses
import datetime as dt
import functools
import json
from decimal import Decimal
from typing import Any

from ledger.core.prices import SNAPSHOT_FORMAT

# Token rates are kept under the library's price key without its ``_mtok``
# (``input``, ``output_audio``, ``cache_write_1h``, ...), every other unit
# (per request, per page, per hour, per 1,000 searches) under its own key.
_TOKEN_SUFFIX = "_mtok"  # noqa: S105 - a price key suffix, not a secret
# Request contexts whose prices the snapshot keeps beside the standard ones:
# each of the library's variants (``service_tier``: ``priority``, ``flex``, ...;
# ``processing: batch``), resolved at the sync into a full set of rates.
_VARIANT_KEYS = ("service_tier", "processing", "speed")


def library_version() -> str:
    """The installed genai-prices version."""
    from importlib.metadata import version

    return version("genai-prices")


def _clause(clause: Any) -> dict[str, Any]:
    fields = dataclasses.asdict(clause)
    ((name, value),) = fields.items()
    if name in {"or_", "and_"}:
        return {name.rstrip("_"): [_clause(inner) for inner in getattr(clause, name)]}
    return {name: value}


def _decimal_text(value: Any) -> str | None:
    if not isinstance(value, Decimal) or not value.is_finite() or value < 0:
        return None
    return format(value.normalize(), "f")


def _price_at(value: Any, above: int | None) -> Any:
    """A rate (plain or tiered) for calls with more than ``above`` input tokens (None: base)."""
    from genai_prices.types import TieredPrices

    if not isinstance(value, TieredPrices):
        return value
    found = value.base
    for tier in value.tiers:  # ascending by start
        if above is not None and tier.start <= above:
            found = tier.price
    return found


def _kind(price_key: str) -> str:
    return price_key.removesuffix(_TOKEN_SUFFIX) if price_key.endswith(_TOKEN_SUFFIX) else price_key


def _price_keys(price: Any) -> list[str]:
    """Every price the library gives this model (whatever its unit), in its own order."""
    return [
        key for key, value in vars(price).items() if not key.startswith("_") and value is not None
    ]


def _rates(price: Any, above: int | None) -> dict[str, str]:
    rates = {}
    for key in _price_keys(price):
        text = _decimal_text(_price_at(getattr(price, key, None), above))
        if text is not None:
            rates[_kind(key)] = text
    return rates


def _priced(price: Any) -> dict[str, Any]:
    """A set of prices as the snapshot keeps it: base rates and long-context tiers."""
    from genai_prices.types import TieredPrices

    entry: dict[str, Any] = {"rates": _rates(price, None)}
    starts = sorted(
        {
            tier.start
            for key in _price_keys(price)
            if isinstance(value := getattr(price, key, None), TieredPrices)
            for tier in value.tiers
        }
    )
    if starts:
        entry["tiers"] = [{"above": start, "rates": _rates(price, start)} for start in starts]
    return entry


def _variants(model: Any, now: dt.datetime) -> list[dict[str, Any]]:
    """The model's prices for each request context it has its own (service tier, batch)."""
    contexts: list[dict[str, str]] = []
    for variant in model.price_variants or ():
        when = dict(variant.when)
        if set(when) <= set(_VARIANT_KEYS) and when not in contexts:
            contexts.append(when)
    found = []
    for when in contexts:
        priced = _priced(model.get_prices(now, when))
        if "input" in priced["rates"] and "output" in priced["rates"]:
            found.append({"when": when, **priced})
    return found


def _model_entry(model: Any, price: Any, now: dt.datetime) -> dict[str, Any] | None:
    """One model of the snapshot, or ``None`` when it has no input and output token price."""
    priced = _priced(price)
    if "input" not in priced["rates"] or "output" not in priced["rates"]:
        return None
    entry: dict[str, Any] = {"id": model.id, "match": _clause(model.match), **priced}
    if isinstance(model.context_window, int) and model.context_window > 0:
        entry["context_window"] = model.context_window  # bounds input given by reference
    search = _decimal_text(_price_at(getattr(price, "web_searches_kcount", None), None))
    if search is not None:
        entry["web_search_per_1000"] = search  # USD per 1,000 server-side web searches
    variants = _variants(model, now)
    if variants:
        entry["variants"] = variants
    return entry


@functools.lru_cache(maxsize=1)
def library_providers() -> tuple[str, ...]:
    """The ids of every provider genai-prices has prices for."""
    from genai_prices import data_snapshot

    return tuple(provider.id for provider in data_snapshot.get_snapshot().providers)


def build_snapshot(now: dt.datetime) -> dict[str, bytes]:
    """The token prices in effect at ``now``: one JSON file per provider, by file name.

    Prices change on day boundaries at most, so one build serves a whole UTC
    day in a process (the snapshot's ``taken_at`` is then the day's start).
    """
    return dict(_build_for_day(now.astimezone(dt.UTC).date()))


@functools.lru_cache(maxsize=4)
def _build_for_day(day: dt.date) -> tuple[tuple[str, bytes], ...]:
    from genai_prices import data_snapshot

    now = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
    source = f"genai-prices {library_version()}"
    taken_at = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    files: dict[str, bytes] = {}
    for provider in data_snapshot.get_snapshot().providers:
        models = []
        for model in provider.models:
            entry = _model_entry(model, model.get_prices(now), now)
            if entry is not None:
                models.append(entry)
        document = {
            "format": SNAPSHOT_FORMAT,
            "provider": provider.id,
            "source": source,
            "taken_at": taken_at,
            "fallback": list(provider.fallback_model_providers or []),
            "models": models,
        }
        text = json.dumps(document, separators=(",", ":"), sort_keys=True)
        files[f"{provider.id}.json"] = text.encode("utf-8")
    return tuple(files.items())
