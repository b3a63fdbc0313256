"""Which provider endpoint a request goes to, and the error bodies each provider sends.

Only the endpoints that bill by tokens are model routes; two endpoints that
cost nothing are ``free``; every other path is ``None`` (a caller that
forwards requests refuses it, so a paid endpoint never slips through ungated).
"""

from dataclasses import dataclass
from typing import Any, Literal

Provider = Literal["anthropic", "openai"]
Kind = Literal["messages", "chat_completions", "responses", "free"]
PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai")


@dataclass(frozen=True, slots=True)
class Route:
    """A known endpoint: whose it is and what kind of call it carries."""

    provider: Provider
    kind: Kind

    @property
    def is_model_call(self) -> bool:
        """Whether the endpoint runs a model (and so is gated and recorded)."""
        return self.kind != "free"


_ROUTES: dict[tuple[str, str], Route] = {
    ("POST", "/v1/messages"): Route("anthropic", "messages"),
    ("POST", "/v1/chat/completions"): Route("openai", "chat_completions"),
    ("POST", "/v1/responses"): Route("openai", "responses"),
    ("POST", "/v1/messages/count_tokens"): Route("anthropic", "free"),
    # Both providers serve GET /v1/models; which one is meant is the caller's to
    # decide (the gateway reads the anthropic-version header).
    ("GET", "/v1/models"): Route("anthropic", "free"),
}


def route(method: str, path: str) -> Route | None:
    """The route of ``method path`` (a path without its query string), or ``None``.

    A trailing slash is not the same path: providers answer it with 404, and
    so does anything that refuses unknown routes.
    """
    return _ROUTES.get((method.upper(), path))


# An SDK client's base URL may carry a path of its own (a gateway's prefix, OpenAI's
# "/v1"), so a client-side guard knows its endpoints by how the path ends.
_ENDINGS: dict[str, tuple[tuple[str, Route], ...]] = {
    "anthropic": (("/v1/messages", Route("anthropic", "messages")),),
    "openai": (
        ("/chat/completions", Route("openai", "chat_completions")),
        ("/responses", Route("openai", "responses")),
    ),
}


def client_route(provider: str, method: str, path: str) -> Route | None:
    """The model route of a request an SDK client of ``provider`` sends, or ``None``.

    Only ``provider``'s own model endpoints match, by the end of the path:
    ``/v1/messages`` for Anthropic (any prefix, so ``/v1/messages/count_tokens``
    and batches do not match), ``/chat/completions`` and ``/responses`` for OpenAI.
    """
    if method.upper() != "POST":
        return None
    for ending, found in _ENDINGS.get(provider, ()):
        if path.endswith(ending):
            return found
    return None


def error_body(provider: str, error_type: str, message: str) -> dict[str, Any]:
    """An error response body in ``provider``'s own shape.

    Anthropic: ``{"type": "error", "error": {"type", "message"}}``; OpenAI:
    ``{"error": {"type", "code", "message"}}``. Any other provider gets the
    OpenAI shape, which most OpenAI-compatible clients read.
    """
    if provider == "anthropic":
        return {"type": "error", "error": {"type": error_type, "message": message}}
    return {"error": {"type": error_type, "code": error_type, "message": message}}
