"""What genai-prices itself says a call costs: the reference the pricing tests hold the product to."""

import datetime as dt
import math
from decimal import Decimal

from genai_prices import Usage, data_snapshot

# The day the pricing tests take the library's prices at (their homes' snapshots too).
PRICES_DAY = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
PRICES_NOW = "2026-12-01T00:00:00Z"


def _model(provider: str, model: str) -> tuple[object, object]:
    found = next(p for p in data_snapshot.get_snapshot().providers if p.id == provider)
    info = found.find_model(model)
    assert info is not None, f"{provider}/{model}"
    return found, info


def library_micros(provider: str, model: str, usage: Usage, tier: str | None = None) -> int:
    """The library's price of ``usage`` in micro-USD, rounded up as the product rounds."""
    found, info = _model(provider, model)
    context = {"service_tier": tier} if tier is not None else None
    price = info.calc_price(  # type: ignore[attr-defined]
        usage, found, genai_request_timestamp=PRICES_DAY, price_context=context
    )
    total: Decimal = price.total_price
    return math.ceil(total * 1_000_000)


def library_rate(provider: str, model: str, price_key: str, tier: str | None = None) -> Decimal:
    """One of the model's rates (``output_audio_mtok``, ...) in USD per million tokens."""
    _found, info = _model(provider, model)
    context = {"service_tier": tier} if tier is not None else None
    value = getattr(info.get_prices(PRICES_DAY, context), price_key)  # type: ignore[attr-defined]
    assert isinstance(value, Decimal), price_key
    return value
