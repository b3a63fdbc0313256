"""A model's context window from the price snapshot's model data (genai-prices)."""

import datetime as dt
import json

from ledger.core.model_data import context_window
from ledger.core.price_table import ProviderPrices, parse_provider_file
from ledger.edges.pricebook import build_snapshot

RATES = {"input": "3", "output": "15"}


def _loader(models: list[dict[str, object]]):
    prices = ProviderPrices("test", (), models)
    return lambda provider: prices if provider == "anthropic" else None


def test_the_window_of_the_matching_model():
    load = _loader([{"id": "big", "match": {"starts_with": "big"}, "rates": RATES,
                     "context_window": 200_000}])  # fmt: skip
    assert context_window(load, "anthropic", "big-1") == 200_000


def test_no_window_or_no_model_is_unknown():
    load = _loader([{"id": "small", "match": {"equals": "small"}, "rates": RATES}])
    assert context_window(load, "anthropic", "small") is None
    assert context_window(load, "anthropic", "other") is None
    assert context_window(load, "openai", "small") is None


def test_the_snapshot_carries_genai_prices_context_windows():
    files = build_snapshot(dt.datetime(2026, 6, 1, tzinfo=dt.UTC))
    anthropic = parse_provider_file(files["anthropic.json"], "anthropic")
    windows = [model.get("context_window") for model in anthropic.models]
    assert any(isinstance(window, int) and window >= 100_000 for window in windows)
    document = json.loads(files["anthropic.json"])
    assert document["models"][0]["id"]
