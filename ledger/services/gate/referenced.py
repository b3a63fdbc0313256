"""The input estimate of a request that points at input it does not carry.

A document or image by URL, a Files API ``file_id``, a ``conversation`` or a
``previous_response_id`` is input the gateway cannot see, so it is never
estimated as free: it counts as if it filled the model's context window (from
the price snapshot's model data; ``DEFAULT_CONTEXT_WINDOW`` when the model has
none there). The one exception is a ``previous_response_id`` that was recorded
here: its input is that response's input plus output, found in the key index
under its idempotency key (one lookup, never a scan of the chain).
"""

from typing import Any

from ledger.providers import RequestEstimate
from ledger.services.gate.prices import PriceDeps, model_context_window

# Larger than any context window offered today: a model whose window is unknown
# is estimated as if the referenced input filled this many tokens.
DEFAULT_CONTEXT_WINDOW = 2_000_000


def window_tokens(deps: PriceDeps, provider: str, model: str) -> int:
    """The model's context window, else ``DEFAULT_CONTEXT_WINDOW``."""
    found = model_context_window(deps, provider, model)
    return DEFAULT_CONTEXT_WINDOW if found is None else found


def _recorded_tokens(states: Any, provider: str, response_id: str) -> int | None:
    """Input plus output tokens of a response this home recorded, if it did."""
    try:
        record = states.load_key(f"{provider}:{response_id}")
    except Exception:  # noqa: BLE001 - an unreadable index is no evidence: fail closed
        return None
    if not isinstance(record, dict) or record.get("event_type") != "budget.record_call":
        return None
    payload = record.get("payload") or {}
    total = 0
    for name in ("input_tokens", "output_tokens"):
        count = payload.get(name)
        if isinstance(count, bool) or not isinstance(count, int):
            return None
        total += count
    return total


def input_tokens(deps: Any, estimate: RequestEstimate) -> int:
    """The request's input estimate, referenced input included."""
    tokens = estimate.input_tokens
    provider, model = estimate.provider, estimate.model
    # The window the request asks for (Anthropic's context-1m beta) is at least the model's.
    window = window_tokens(deps, provider, model)
    if estimate.context_window is not None:
        window = max(window, estimate.context_window)
    if estimate.unseen_input:
        return max(tokens, window)
    if estimate.previous_response_id is not None:
        earlier = _recorded_tokens(deps.states, provider, estimate.previous_response_id)
        if earlier is None:
            return max(tokens, window)
        return tokens + earlier
    return tokens
