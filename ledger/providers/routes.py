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


def error_body(provider: str, error_type: str, message: str) -> dict[str, Any]:
    """An error response body in ``provider``'s own shape.

    Anthropic: ``{"type": "error", "error": {"type", "message"}}``; OpenAI:
    ``{"error": {"type", "code", "message"}}``. Any other provider gets the
    OpenAI shape, which most OpenAI-compatible clients read.
    """
    if provider == "anthropic":
        return {"type": "error", "error": {"type": error_type, "message": message}}
    return {"error": {"type": error_type, "code": error_type, "message": message}}
