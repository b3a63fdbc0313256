"""The estimate of a model request, read from the request body alone.

Each provider's module (``anthropic``, ``openai``, ``gemini``) lists every
request field, content part, tool type and beta its estimate knows, each
with its rule; anything it does not list counts as if it filled the model's
context window, so a new provider feature makes a call dearer in the ledger,
never cheaper. The rules:

- text (system prompts and instructions, every message's text, tool calls
  and results, tool definitions and schemas): its UTF-8 bytes ÷ 3, rounded
  up (a token is rarely under 3 bytes of text, so this over-counts);
- an image: its provider's formula from its real dimensions, else the
  provider's documented maximum;
- a PDF: its page count times the provider's per-page bound; a PDF that
  cannot be read counts as the context window;
- the provider's own framing: fixed tokens per request, per message and per
  tool definition (Anthropic's tool-use system prompt among them);
- input the request only points at or the provider fetches — a document or
  image by URL, a Files API ``file_id``, ``conversation``, a stored prompt,
  cached content, a server tool that searches or fetches — and any field,
  part, tool or beta not listed: the model's context window (``unseen_input``;
  the caller sizes it, a ``previous_response_id`` it recorded itself as that
  response's input and output). Anthropic's ``context-1m-*`` beta makes the
  window 1M tokens (``context_window``).

The output estimate is the request's own output limit (times ``n`` for an
OpenAI request asking for several choices). A request without one has no
upper bound: it is refused before anything is sent, unless the caller (the
gateway) gives it a default limit, which it then writes into the body it sends.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ledger.providers import anthropic, gemini, openai
from ledger.providers.limits import (
    RequestRefused,
    choices,
    missing_limit_message,
    read_output_limit,
)
from ledger.providers.routes import Route
from ledger.providers.tally import Tally
from ledger.providers.tally import field as tally_field

__all__ = ["RequestEstimate", "RequestRefused", "estimate_request"]


@dataclass(frozen=True, slots=True)
class RequestEstimate:
    """What a request may cost: its model and token upper bounds.

    ``max_output_tokens`` bounds the whole answer: ``output_limit`` (the limit
    for each choice, as stated or given by default) times ``choices``.
    ``limit_given`` says the request stated it; ``document`` is the parsed
    body, for a caller that sends it with another limit.
    """

    provider: str
    model: str
    input_tokens: int
    max_output_tokens: int
    stream: bool
    metadata_user_id: str | None
    output_limit: int = 0
    choices: int = 1
    limit_given: bool = True
    document: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # Input the body only points at (by URL, file id, or conversation): its size is unknown.
    unseen_input: bool = False
    # A Responses request continuing a stored response (its input is that response's).
    previous_response_id: str | None = None
    # The context window the request asks for (Anthropic's context-1m beta), if it sets one.
    context_window: int | None = None
    # What counts as the context window, for a reader of the estimate.
    window_reasons: tuple[str, ...] = ()


_WALKERS = {
    "messages": anthropic.tally_request,
    "chat_completions": openai.tally_chat_request,
    "responses": openai.tally_responses_request,
    "generate_content": gemini.tally_request,
}


def estimate_request(
    route: Route,
    body: bytes,
    *,
    default_output_limit: int | None = None,
    headers: Iterable[tuple[str, str]] = (),
) -> RequestEstimate:
    """The model and token upper bounds of a request to ``route``.

    Args:
        route: the endpoint the request goes to (a model call).
        body: the request body as sent.
        default_output_limit: the output limit (for each choice) of a request
            that states none; without it, such a request is refused.
        headers: the request's headers (Anthropic's ``anthropic-beta`` counts).

    Raises:
        RequestRefused: the route is not a model call, the body is not a JSON
            object, or it names no model or (without a default) no output limit.
    """
    if not route.is_model_call:
        raise RequestRefused("the request is not a model call; it costs nothing to estimate")
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RequestRefused(f"the request body is not JSON ({type(exc).__name__})") from exc
    except Exception as exc:  # any text json cannot read is a bad request, never a crash
        raise RequestRefused(f"the request body is not JSON ({type(exc).__name__})") from exc
    if not isinstance(document, dict):
        raise RequestRefused("the request body is not a JSON object")
    model = route.model if route.kind == "generate_content" else document.get("model")
    if not isinstance(model, str) or not model:
        raise RequestRefused("the request names no model")
    stated = read_output_limit(route.kind, document)
    if stated is None and default_output_limit is None:
        raise RequestRefused(f"{missing_limit_message(route.kind)}; it was not sent")
    limit = stated if stated is not None else default_output_limit
    assert limit is not None  # noqa: S101 - one of the two is given
    answers = choices(route.kind, document)
    tally = Tally()
    try:
        _WALKERS[route.kind](tally, document, model)
        window = (
            anthropic.beta_window(
                tally, [*anthropic.request_betas(headers), *anthropic.body_betas(document)]
            )
            if route.kind == "messages"
            else None
        )
    except RecursionError as exc:
        raise RequestRefused("the request body nests too deeply to be estimated") from exc
    except (ValueError, TypeError) as exc:  # text no rule can read: refused, never a crash
        raise RequestRefused(f"the request cannot be estimated ({type(exc).__name__})") from exc
    user_id = (
        tally_field(document.get("metadata"), "user_id") if route.provider == "anthropic" else None
    )
    previous = document.get("previous_response_id") if route.kind == "responses" else None
    conversation = document.get("conversation") if route.kind == "responses" else None
    if previous is not None and not (isinstance(previous, str) and previous):
        raise RequestRefused("the request's previous_response_id is not a response id")
    return RequestEstimate(
        provider=route.provider,
        model=model,
        input_tokens=tally.input_tokens,
        max_output_tokens=limit * answers,
        stream=route.streamed or document.get("stream") is True,
        metadata_user_id=user_id if isinstance(user_id, str) else None,
        output_limit=limit,
        choices=answers,
        limit_given=stated is not None,
        document=document,
        unseen_input=tally.unseen > 0 or conversation is not None,
        previous_response_id=previous,
        context_window=window,
        window_reasons=tuple(tally.reasons),
    )
