"""A model's data beside its prices, from the price snapshot (genai-prices' model data).

The snapshot keeps, for each model that has them, its context window (which
bounds input a request gives by reference) and its fee per 1,000 server-side
web searches.
"""

from fractions import Fraction

from ledger.core.price_table import ProviderLoader, find_model_entry


def web_search_rate(load: ProviderLoader, provider: str, model: str) -> Fraction | None:
    """The model's web search fee in USD per 1,000 searches from the snapshot, if it has one.

    Raises:
        PriceError: the snapshot's file for a provider is malformed.
    """
    entry = find_model_entry(load, provider, model)
    text = None if entry is None else entry[0].get("web_search_per_1000")
    if not isinstance(text, str):
        return None
    try:
        rate = Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None
    return rate if rate >= 0 else None


def context_window(load: ProviderLoader, provider: str, model: str) -> int | None:
    """The model's context window in tokens from the snapshot's model data, if it has one.

    Raises:
        PriceError: the snapshot's file for a provider is malformed.
    """
    entry = find_model_entry(load, provider, model)
    window = None if entry is None else entry[0].get("context_window")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        return None
    return window
