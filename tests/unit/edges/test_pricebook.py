"""The price snapshot keeps genai-prices' long-context tiers and prices as the library does."""

import datetime as dt
import json
import math
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price

from ledger.core.price_table import parse_provider_file, quote
from ledger.core.prices import TokenCounts, quote_cost_micros
from ledger.edges.pricebook import build_snapshot

NOW = dt.datetime(2026, 11, 26, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def snapshot():
    return build_snapshot(NOW)


def tiered_models(snapshot, provider):
    document = json.loads(snapshot[f"{provider}.json"])
    return [model for model in document["models"] if model.get("tiers")]


def test_tiered_models_are_written_with_their_tiers(snapshot):
    """claude-sonnet-4-5: above 200k input tokens every rate doubles (output ×1.5)."""
    sonnet = next(m for m in tiered_models(snapshot, "anthropic") if m["id"] == "claude-sonnet-4-5")
    assert sonnet["rates"]["input"] == "3"
    assert sonnet["tiers"] == [
        {"above": 200_000, "rates": {"input": "6", "output": "22.5", "cache_read": "0.6",
                                     "cache_write": "7.5", "cache_write_1h": "12",
                                     "web_searches_kcount": "10"}},
    ]  # fmt: skip


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_every_tiered_model_costs_what_genai_prices_computes(snapshot, provider):
    """At, just past and far past each threshold, our exact cost is the library's, rounded up."""
    load = lambda name: parse_provider_file(snapshot[f"{name}.json"], name)  # noqa: E731
    models = tiered_models(snapshot, provider)
    assert models, f"genai-prices lists no tiered {provider} model any more"
    for model in models:
        found = quote(provider, model["id"], {}, load)
        assert found is not None
        for tier in model["tiers"]:
            for total in (tier["above"], tier["above"] + 1, tier["above"] * 3):
                tokens = TokenCounts(input=total - 1000, cache_read=1000, output=5000)
                ours, _rates = quote_cost_micros(tokens, found)
                usage = Usage(input_tokens=total, cache_read_tokens=1000, output_tokens=5000)
                theirs = calc_price(usage, model["id"], provider_id=provider,
                                    genai_request_timestamp=NOW).total_price  # fmt: skip
                assert ours == math.ceil(theirs * Decimal(1_000_000)), (model["id"], total)
