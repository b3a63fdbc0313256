"""The price snapshot keeps every rate genai-prices ships: each modality, tier and service tier.

The product's table (``ledger.edges.pricebook.build_snapshot``, read back by
``ledger.core.prices``) is held against the library's own data for every model
with token prices: every price key (audio, image and video tokens, cache
writes by lifetime, reasoning, per-request fees, ...), every long-context tier
and every service tier and batch price, at the moment of the snapshot.
"""

import datetime as dt
import json
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from genai_prices import data_snapshot
from genai_prices.types import TieredPrices
from genai_prices.units import _get_registry

from ledger.core.price_table import ProviderPrices, parse_provider_file, quote
from ledger.core.prices import RATE_KINDS, TOKEN_RATE_LABELS
from ledger.core.rate_tables import rates_from
from ledger.edges.pricebook import build_snapshot

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def _kind(price_key: str) -> str:
    return price_key.removesuffix("_mtok") if price_key.endswith("_mtok") else price_key


def _at(value: Any, above: int | None) -> Decimal:
    if not isinstance(value, TieredPrices):
        return Decimal(value)
    found = value.base
    for tier in value.tiers:
        if above is not None and tier.start <= above:
            found = tier.price
    return found


def _loader(files: dict[str, bytes]) -> Any:
    def load(provider: str) -> ProviderPrices | None:
        raw = files.get(f"{provider}.json")
        return None if raw is None else parse_provider_file(raw, provider)

    return load


def _priced_models() -> list[tuple[str, Any]]:
    found = []
    for provider in data_snapshot.get_snapshot().providers:
        for model in provider.models:
            price = model.get_prices(NOW)
            if price.input_mtok is not None and price.output_mtok is not None:
                found.append((provider.id, model))
    return found


def _expected(price: Any, above: int | None) -> dict[str, Fraction]:
    return {
        _kind(key): Fraction(str(_at(value, above)))
        for key, value in vars(price).items()
        if not key.startswith("_") and value is not None
    }


def _starts(price: Any) -> list[int]:
    return sorted(
        {
            tier.start
            for value in vars(price).values()
            if isinstance(value, TieredPrices)
            for tier in value.tiers
        }
    )


def test_the_rate_labels_are_the_librarys_units():
    """Each token rate is for what genai-prices' unit says (direction, modality, type, TTL)."""
    units = {
        _kind(unit.price_key): frozenset(
            value for key, value in unit.dimensions.items() if key != "family"
        )
        for unit in _get_registry().units.values()
        if unit.dimensions.get("family") == "tokens"
    }
    assert TOKEN_RATE_LABELS == units


def test_every_rate_tier_and_service_tier_of_every_priced_model_is_kept():
    files = build_snapshot(NOW)
    checked = variants = tiers = modal = 0
    for provider, model in _priced_models():
        entry = next(
            e for e in json.loads(files[f"{provider}.json"])["models"] if e["id"] == model.id
        )
        price = model.get_prices(NOW)
        base = _expected(price, None)
        # The reader takes every rate of the entry (each kind beside the five base ones).
        read = rates_from(entry["rates"], extra=True)
        assert {kind for kind, _ in read.extra} == set(base) - set(RATE_KINDS)
        assert {k: Fraction(v) for k, v in entry["rates"].items()} == base, f"{provider}/{model.id}"
        modal += any(kind not in {"input", "output", "cache_read"} for kind in base)
        starts = _starts(price)
        assert [tier["above"] for tier in entry.get("tiers", [])] == starts
        for tier in entry.get("tiers", []):
            tiers += 1
            assert {k: Fraction(v) for k, v in tier["rates"].items()} == _expected(
                price, tier["above"]
            ), f"{provider}/{model.id} above {tier['above']}"
        for variant in entry.get("variants", []):
            variants += 1
            resolved = model.get_prices(NOW, variant["when"])
            assert {k: Fraction(v) for k, v in variant["rates"].items()} == _expected(
                resolved, None
            ), f"{provider}/{model.id} {variant['when']}"
        contexts = {
            tuple(sorted(v.when.items()))
            for v in model.price_variants or ()
            if v.constraint is None or v.constraint.active(NOW)
        }
        assert {tuple(sorted(v["when"].items())) for v in entry.get("variants", [])} == {
            c for c in contexts if all(k in {"service_tier", "processing", "speed"} for k, _ in c)
        }, f"{provider}/{model.id}"
        checked += 1
    assert checked > 1000
    assert tiers > 10
    assert variants > 100
    assert modal > 100


@pytest.mark.parametrize(
    ("provider", "model", "kind", "rate"),
    [
        ("openai", "gpt-audio", "input_audio", "32"),
        ("openai", "gpt-audio", "output_audio", "64"),
        ("google", "gemini-2.5-flash-image", "output_image", "30"),
        ("anthropic", "claude-sonnet-4-5", "cache_write_1h", "6"),
    ],
)
def test_the_reader_holds_the_modality_rates(provider, model, kind, rate):
    found = quote(provider, model, {}, _loader(build_snapshot(NOW)))
    assert found is not None
    assert found.rates.rate_of(kind) == Fraction(rate)


def test_the_reader_holds_the_service_tiers():
    found = quote("openai", "gpt-5", {}, _loader(build_snapshot(NOW)))
    assert found is not None
    priority = found.for_service_tier("priority")
    flex = found.for_service_tier("flex")
    assert priority is not None
    assert flex is not None
    assert (priority.rates.input, priority.rates.output) == (Fraction("2.5"), Fraction(20))
    assert (flex.rates.input, flex.rates.output) == (Fraction("0.625"), Fraction(5))
    assert found.for_service_tier("default") is found
    assert found.for_service_tier("scale") is None  # a tier with no price here
