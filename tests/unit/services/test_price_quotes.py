"""Price quotes are found once per (provider, model, price source) and never served stale."""

import json
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import pytest

from ledger.core.prices import SNAPSHOT_FORMAT, Rates
from ledger.services.gate import prices


def _snapshot(output_rate: str) -> bytes:
    return json.dumps(
        {"format": SNAPSHOT_FORMAT, "provider": "anthropic", "source": "test-prices",
         "fallback": [], "models": [
             {"id": "claude-other", "match": {"starts_with": "claude-other"},
              "rates": {"input": "1", "output": "1"}},
             {"id": "claude-cached", "match": {"starts_with": "claude-cached"},
              "rates": {"input": "3", "output": output_rate}},
         ]}
    ).encode()  # fmt: skip


class _Home:
    def __init__(self) -> None:
        self.files = {"anthropic": _snapshot("15")}
        self._config = SimpleNamespace(price_overrides={})

    @property
    def config(self) -> Any:
        """Only the price overrides a lookup reads."""
        return self._config

    def price_file(self, provider: str) -> bytes | None:
        return self.files.get(provider)


@pytest.fixture
def matches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The models matched against a price table (the work the cache saves)."""
    seen: list[str] = []
    real = vars(prices)["quote"]

    def counting(provider: str, model: str, *args: Any) -> Any:
        seen.append(model)
        return real(provider, model, *args)

    monkeypatch.setattr(prices, "quote", counting)
    monkeypatch.setattr(prices, "_QUOTES", type(prices._QUOTES)())
    return seen


def test_a_quote_is_matched_once_for_many_calls(matches: list[str]):
    home = _Home()
    for _ in range(50):
        found, _why = prices.find_price(home, "anthropic", "claude-cached-1")
        assert found is not None
    assert matches == ["claude-cached-1"]


def test_a_changed_snapshot_is_quoted_afresh(matches: list[str]):
    home = _Home()
    first, _ = prices.find_price(home, "anthropic", "claude-cached-1")
    home.files["anthropic"] = _snapshot("75")
    second, _ = prices.find_price(home, "anthropic", "claude-cached-1")
    assert first is not None
    assert second is not None
    assert second.rates.output == 5 * first.rates.output
    assert len(matches) == 2


def test_a_changed_override_is_quoted_afresh(matches: list[str]):
    home = _Home()
    library, _ = prices.find_price(home, "anthropic", "claude-cached-1")
    one = Fraction(1)
    flat = Rates(one, one, one, one, one)
    home._config = SimpleNamespace(price_overrides={"anthropic/claude-cached-1": flat})
    override, _ = prices.find_price(home, "anthropic", "claude-cached-1")
    assert library is not None
    assert override is not None
    assert override.rates == flat
    assert override.source != library.source


def test_a_removed_snapshot_is_an_unknown_price(matches: list[str]):
    home = _Home()
    assert prices.find_price(home, "anthropic", "claude-cached-1")[0] is not None
    del home.files["anthropic"]
    found, why = prices.find_price(home, "anthropic", "claude-cached-1")
    assert found is None
    assert "no price snapshot for provider anthropic" in why


def _windowed(window: int) -> bytes:
    document = json.loads(_snapshot("15"))
    document["models"][1]["context_window"] = window
    return json.dumps(document).encode()


def test_a_provider_file_is_parsed_once_and_again_when_it_changes(
    monkeypatch: pytest.MonkeyPatch,
):
    parsed: list[str] = []
    real = vars(prices)["parse_provider_file"]

    def counting(raw: bytes, provider: str) -> Any:
        parsed.append(provider)
        return real(raw, provider)

    monkeypatch.setattr(prices, "parse_provider_file", counting)
    monkeypatch.setattr(prices, "_PARSED", type(prices._PARSED)())
    home = _Home()
    home.files["anthropic"] = _windowed(100_000)
    for _ in range(20):
        assert prices.model_context_window(home, "anthropic", "claude-cached-1") == 100_000
    assert parsed == ["anthropic"]
    home.files["anthropic"] = _windowed(200_000)
    assert prices.model_context_window(home, "anthropic", "claude-cached-1") == 200_000
    assert parsed == ["anthropic", "anthropic"]
