"""Which provider endpoint a request goes to, and the error bodies each provider sends.

Only the endpoints that bill by tokens are model routes; the endpoints that
cost nothing are ``free``; every other path is ``None`` (a caller that
forwards requests refuses it, so a paid endpoint never slips through ungated).

The Gemini API names its model in the path
(``/v1beta/models/{model}:generateContent``, ``:streamGenerateContent``), so
its routes carry the model; ``:countTokens`` and the model list are free.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Provider = Literal["anthropic", "openai", "google"]
Kind = Literal["messages", "chat_completions", "responses", "generate_content", "free"]
PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai", "google")
_GEMINI_CALL = re.compile(r"^/v1beta/models/([^/:]+):(generateContent|streamGenerateContent)$")
_GEMINI_FREE = re.compile(r"^/v1beta/models(/[^/:]+(:countTokens)?)?$")


@dataclass(frozen=True, slots=True)
class Route:
    """A known endpoint: whose it is and what kind of call it carries.

    ``model`` is the model a Gemini path names; ``streamed`` says the path
    itself asks for a stream (Gemini's ``:streamGenerateContent``).
    """

    provider: str  # a built-in Provider, or an OpenAI-compatible provider's name
    kind: Kind
    model: str | None = None
    streamed: bool = False

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
    verb = method.upper()
    found = _ROUTES.get((verb, path))
    if found is not None or not path.startswith("/v1beta/"):
        return found
    call = _GEMINI_CALL.fullmatch(path)
    if call is not None and verb == "POST":
        streamed = call.group(2) == "streamGenerateContent"
        return Route("google", "generate_content", model=call.group(1), streamed=streamed)
    free = _GEMINI_FREE.fullmatch(path)
    if free is not None and (verb == "GET") == (free.group(2) is None):
        return Route("google", "free")
    return None


_COMPATIBLE_KINDS: dict[str, Kind] = {
    "/v1/chat/completions": "chat_completions",
    "/v1/responses": "responses",
}


def compatible_route(method: str, path: str, names: Iterable[str]) -> Route | None:
    """The route of a call to an OpenAI-compatible provider: ``POST /<name>/v1/...``.

    Only Chat Completions and the Responses API of a provider in ``names``
    are served; any other path under its prefix is ``None``.
    """
    if method.upper() != "POST":
        return None
    name, slash, rest = path.removeprefix("/").partition("/")
    kind = _COMPATIBLE_KINDS.get(f"/{rest}") if slash else None
    if kind is None or name not in names:
        return None
    return Route(name, kind)


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


# google.rpc.Code names of the statuses the gateway answers with.
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    402: "RESOURCE_EXHAUSTED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    426: "FAILED_PRECONDITION",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
}


def error_body(provider: str, error_type: str, message: str, status: int = 400) -> dict[str, Any]:
    """An error response body in ``provider``'s own shape.

    Anthropic: ``{"type": "error", "error": {"type", "message"}}``; Gemini:
    ``{"error": {"code", "message", "status"}}`` (``code`` is the HTTP status,
    given as ``status``); OpenAI: ``{"error": {"type", "code", "message"}}``.
    Any other provider gets the OpenAI shape, which most OpenAI-compatible
    clients read.
    """
    if provider == "anthropic":
        return {"type": "error", "error": {"type": error_type, "message": message}}
    if provider == "google":
        return {
            "error": {
                "code": status,
                "message": message,
                "status": _GOOGLE_STATUS.get(status, "UNKNOWN"),
            }
        }
    return {"error": {"type": error_type, "code": error_type, "message": message}}
