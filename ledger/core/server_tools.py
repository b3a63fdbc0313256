"""Fees for server-side tools a provider runs for a call (web search), as pure functions.

Anthropic reports a call's searches in ``usage.server_tool_use.web_search_requests``;
for OpenAI's Responses API the gateway counts the answer's ``web_search_call``
output items and adds them to the usage object as ``web_search_calls``. Each
search costs the model's per-search fee from genai-prices' model data, else
``DEFAULT_WEB_SEARCH_USD_PER_1000`` ($10 per 1,000, both providers' list price).
"""

import math
from fractions import Fraction
from typing import Any

DEFAULT_WEB_SEARCH_USD_PER_1000 = Fraction(10)
# The key the gateway adds to an OpenAI usage object: its count of web searches.
OPENAI_SEARCH_FIELD = "web_search_calls"


def web_searches(provider: str, usage: Any) -> int:
    """The web searches a usage object reports (0 when it reports none or is malformed)."""
    if not isinstance(usage, dict):
        return 0
    if provider == "anthropic":
        server = usage.get("server_tool_use")
        found = server.get("web_search_requests") if isinstance(server, dict) else None
    else:
        found = usage.get(OPENAI_SEARCH_FIELD)
    if isinstance(found, bool) or not isinstance(found, int) or found < 0:
        return 0
    return found


def search_fee_micros(searches: int, usd_per_1000: Fraction | None) -> int:
    """The fee of ``searches`` in micro-USD, rounded up (default rate when ``None``)."""
    rate = DEFAULT_WEB_SEARCH_USD_PER_1000 if usd_per_1000 is None else usd_per_1000
    return math.ceil(searches * rate * 1000)  # USD per 1,000 × 10^6 / 10^3
