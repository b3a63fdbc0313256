"""Golden prices from genai-prices' own data and arithmetic, for each modality and tier.

Each case is a provider's own usage object (as its API reports it) and the same
usage as genai-prices counts it (``genai_prices.Usage``): the product's price
(``usage_reading`` + ``quote_cost_micros`` over the snapshot it builds) must be
the library's ``calc_price`` to the micro-dollar, rounded up.
"""

import datetime as dt
import math
from typing import Any

import pytest
from genai_prices import Usage, data_snapshot

from ledger.core.price_table import ProviderPrices, parse_provider_file, quote
from ledger.core.prices import quote_cost_micros
from ledger.core.usage_objects import usage_reading
from ledger.edges.pricebook import build_snapshot

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)

CASES: list[tuple[str, str, dict[str, Any], Usage, str | None]] = [
    # OpenAI Chat Completions: audio in and audio out (gpt-audio: $32 / $64 per Mtok).
    ("openai", "gpt-audio",
     {"prompt_tokens": 1200, "completion_tokens": 900,
      "prompt_tokens_details": {"audio_tokens": 1000, "cached_tokens": 0},
      "completion_tokens_details": {"audio_tokens": 800, "reasoning_tokens": 0}},
     Usage(input_tokens=1200, input_audio_tokens=1000, output_tokens=900,
           output_audio_tokens=800), None),
    # Text cached and uncached beside audio.
    ("openai", "gpt-4o-audio-preview",
     {"prompt_tokens": 3000, "completion_tokens": 100,
      "prompt_tokens_details": {"audio_tokens": 500, "cached_tokens": 1000},
      "completion_tokens_details": {"audio_tokens": 60}},
     Usage(input_tokens=3000, input_audio_tokens=500, cache_read_tokens=1000,
           output_tokens=100, output_audio_tokens=60), None),
    # Service tiers: gpt-5 at priority and at flex, Chat Completions and Responses usage.
    ("openai", "gpt-5",
     {"prompt_tokens": 10_000, "completion_tokens": 5_000,
      "prompt_tokens_details": {"cached_tokens": 2_000},
      "completion_tokens_details": {"reasoning_tokens": 3_000}, "service_tier": "priority"},
     Usage(input_tokens=10_000, cache_read_tokens=2_000, output_tokens=5_000), "priority"),
    ("openai", "gpt-5",
     {"input_tokens": 10_000, "output_tokens": 5_000,
      "input_tokens_details": {"cached_tokens": 2_000}, "service_tier": "flex"},
     Usage(input_tokens=10_000, cache_read_tokens=2_000, output_tokens=5_000), "flex"),
    ("openai", "gpt-5",
     {"input_tokens": 10_000, "output_tokens": 5_000, "service_tier": "default"},
     Usage(input_tokens=10_000, output_tokens=5_000), "default"),
    # Gemini: an image answer ($30 per Mtok of image output) and audio input.
    ("google", "gemini-2.5-flash-image",
     {"promptTokenCount": 20, "candidatesTokenCount": 1300,
      "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": 1290},
                                  {"modality": "TEXT", "tokenCount": 10}]},
     Usage(input_tokens=20, output_tokens=1300, output_image_tokens=1290), None),
    ("google", "gemini-2.5-flash",
     {"promptTokenCount": 5000, "cachedContentTokenCount": 1000, "candidatesTokenCount": 200,
      "thoughtsTokenCount": 100,
      "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 3000},
                              {"modality": "TEXT", "tokenCount": 2000}],
      "cacheTokensDetails": [{"modality": "AUDIO", "tokenCount": 1000}]},
     Usage(input_tokens=5000, input_audio_tokens=3000, cache_read_tokens=1000,
           cache_audio_read_tokens=1000, output_tokens=300), None),
    ("google", "gemini-live-2.5-flash",
     {"promptTokenCount": 4000, "candidatesTokenCount": 2000,
      "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 1500},
                              {"modality": "IMAGE", "tokenCount": 1000},
                              {"modality": "VIDEO", "tokenCount": 500},
                              {"modality": "TEXT", "tokenCount": 1000}],
      "candidatesTokensDetails": [{"modality": "AUDIO", "tokenCount": 1800}]},
     Usage(input_tokens=4000, input_audio_tokens=1500, input_image_tokens=1000,
           input_video_tokens=500, output_tokens=2000, output_audio_tokens=1800), None),
    # Anthropic: cache writes of both lifetimes, and the long-context tier they reach.
    ("anthropic", "claude-sonnet-4-5",
     {"input_tokens": 1000, "output_tokens": 700, "cache_creation_input_tokens": 3000,
      "cache_creation": {"ephemeral_5m_input_tokens": 2000, "ephemeral_1h_input_tokens": 1000},
      "cache_read_input_tokens": 5000},
     Usage(input_tokens=9000, cache_write_tokens=3000, cache_write_1h_tokens=1000,
           cache_read_tokens=5000, output_tokens=700), None),
    ("anthropic", "claude-sonnet-4-5",
     {"input_tokens": 150_000, "output_tokens": 2000, "cache_creation_input_tokens": 60_000,
      "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 60_000},
      "cache_read_input_tokens": 10_000},
     Usage(input_tokens=220_000, cache_write_tokens=60_000, cache_write_1h_tokens=60_000,
           cache_read_tokens=10_000, output_tokens=2000), None),
]  # fmt: skip


def _load(provider: str) -> ProviderPrices | None:
    raw = build_snapshot(NOW).get(f"{provider}.json")
    return None if raw is None else parse_provider_file(raw, provider)


def _library_micros(provider: str, model: str, usage: Usage, tier: str | None) -> int:
    found = next(p for p in data_snapshot.get_snapshot().providers if p.id == provider)
    info = found.find_model(model)
    assert info is not None
    context = {"service_tier": tier} if tier is not None else None
    price = info.calc_price(usage, found, genai_request_timestamp=NOW, price_context=context)
    return math.ceil(price.total_price * 1_000_000)


@pytest.mark.parametrize(("provider", "model", "usage", "library_usage", "tier"), CASES)
def test_the_product_prices_as_the_library_does(provider, model, usage, library_usage, tier):
    reading = usage_reading(provider, usage)
    assert reading.unknown == ()
    found = quote(provider, model, {}, _load)
    assert found is not None
    tiered = found.for_service_tier(reading.service_tier)
    assert tiered is not None
    micros, _rates = quote_cost_micros(reading.tokens, tiered)
    assert micros == _library_micros(provider, model, library_usage, tier)


def test_priced_as_text_the_modalities_would_be_far_under_their_list_price():
    """The figures the modalities cost, against what text rates would make of them."""
    provider, model, _usage, library_usage, _tier = CASES[0]
    as_text = _library_micros(provider, model, Usage(input_tokens=1200, output_tokens=900), None)
    listed = _library_micros(provider, model, library_usage, None)
    assert listed > 5 * as_text
