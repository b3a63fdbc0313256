"""The estimate of a model request, read from the request body alone.

The input estimate is the UTF-8 size of all the text a request sends to the
model ÷ 3, rounded up (a token is rarely under 3 bytes of text, so this
over-counts rather than under-counts): the system prompt or instructions, the
text of every message and content block (tool calls as their name and input,
tool results as their content), and each tool's name, description and input
schema as JSON. Each image adds 1,600 tokens; a document sent as base64 adds
its base64 bytes ÷ 3. Blocks of a kind not named here count as their whole
JSON text, so something new in a provider's format is over-counted, never
free. Input the request only points at — a document or image by URL, a Files
API ``file_id``, ``previous_response_id`` or ``conversation`` — cannot be
counted here: the estimate says so (``unseen_input``,
``previous_response_id``), and the caller estimates it as the model's whole
context window (or, for a response it recorded itself, that response's
input and output). The output estimate is the request's own output limit
(times ``n`` for an OpenAI request asking for several choices). A request
without one has no upper bound: it is refused before anything is sent, unless
the caller (the gateway) gives it a default limit, which it then writes into
the body it sends.
"""

import json
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


_WALKERS = {
    "messages": anthropic.tally_request,
    "chat_completions": openai.tally_chat_request,
    "responses": openai.tally_responses_request,
    "generate_content": gemini.tally_request,
}


def estimate_request(
    route: Route, body: bytes, *, default_output_limit: int | None = None
) -> RequestEstimate:
    """The model and token upper bounds of a request to ``route``.

    Args:
        route: the endpoint the request goes to (a model call).
        body: the request body as sent.
        default_output_limit: the output limit (for each choice) of a request
            that states none; without it, such a request is refused.

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
        _WALKERS[route.kind](tally, document)
    except RecursionError as exc:
        raise RequestRefused("the request body nests too deeply to be estimated") from exc
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
    )
