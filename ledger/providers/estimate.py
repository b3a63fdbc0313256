"""The estimate of a model request, read from the request body alone.

The input estimate is the UTF-8 size of all the text a request sends to the
model ÷ 3, rounded up (a token is rarely under 3 bytes of text, so this
over-counts rather than under-counts): the system prompt or instructions, the
text of every message and content block (tool calls as their name and input,
tool results as their content), and each tool's name, description and input
schema as JSON. Each image adds 1,600 tokens; a document sent as base64 adds
its base64 bytes ÷ 3. Blocks of a kind not named here count as their whole
JSON text, so something new in a provider's format is over-counted, never
free. The output estimate is the request's own output limit (times ``n`` for
an OpenAI request asking for several choices). A request without one has no
upper bound: it is refused before anything is sent, unless the caller (the
gateway) gives it a default limit, which it then writes into the body it sends.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from ledger.providers.limits import (
    RequestRefused,
    choices,
    missing_limit_message,
    read_output_limit,
)
from ledger.providers.routes import Route

IMAGE_TOKENS = 1600
BYTES_PER_TOKEN = 3

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


class _Tally:
    """Bytes of text (and base64 documents) and images seen so far."""

    def __init__(self) -> None:
        self.text_bytes = 0
        self.images = 0

    def text(self, value: Any) -> None:
        if isinstance(value, str):
            self.text_bytes += len(value.encode("utf-8"))
        elif value is not None:
            self.json(value)

    def json(self, value: Any) -> None:
        if value is not None:
            self.text_bytes += len(_json_text(value).encode("utf-8"))

    def base64(self, data: Any) -> None:
        """A base64 payload (a data URL's or a bare one): its bytes count as text."""
        if isinstance(data, str):
            _, comma, payload = data.partition(",")
            self.text_bytes += len(payload if comma and data.startswith("data:") else data)
        else:
            self.json(data)

    @property
    def input_tokens(self) -> int:
        return -(-self.text_bytes // BYTES_PER_TOKEN) + self.images * IMAGE_TOKENS


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else None


# Anthropic Messages: system, messages[].content, tools[].


def _anthropic_content(tally: _Tally, content: Any) -> None:
    if isinstance(content, str) or not isinstance(content, list):
        tally.text(content)
        return
    for block in content:
        _anthropic_block(tally, block)


def _anthropic_block(tally: _Tally, block: Any) -> None:
    kind = _field(block, "type")
    if kind == "text":
        tally.text(block.get("text"))
    elif kind == "image":
        tally.images += 1
    elif kind == "document":
        tally.text(block.get("title"))
        tally.text(block.get("context"))
        source = block.get("source")
        source_kind = _field(source, "type")
        if source_kind == "base64":
            tally.base64(source.get("data"))
        elif source_kind == "text":
            tally.text(source.get("data"))
        elif source_kind == "content":
            _anthropic_content(tally, source.get("content"))
        else:
            tally.json(source)
    elif kind in {"tool_use", "server_tool_use"}:
        tally.text(block.get("name"))
        tally.json(block.get("input"))
    elif kind == "tool_result":
        _anthropic_content(tally, block.get("content"))
    elif kind == "thinking":
        tally.text(block.get("thinking"))
    elif kind == "redacted_thinking":
        tally.text(block.get("data"))
    elif kind == "search_result":
        tally.text(block.get("title"))
        tally.text(block.get("source"))
        _anthropic_content(tally, block.get("content"))
    else:
        tally.json(block)


def _anthropic(tally: _Tally, body: dict[str, Any]) -> None:
    _anthropic_content(tally, body.get("system"))
    for message in _items(body.get("messages")):
        if isinstance(message, dict):
            _anthropic_content(tally, message.get("content"))
        else:
            tally.json(message)
    for tool in _items(body.get("tools")):
        tally.text(_field(tool, "name"))
        tally.text(_field(tool, "description"))
        tally.json(_field(tool, "input_schema"))


# OpenAI: Chat Completions messages and Responses input share their part kinds.


def _openai_content(tally: _Tally, content: Any) -> None:
    if isinstance(content, str) or not isinstance(content, list):
        tally.text(content)
        return
    for part in content:
        _openai_part(tally, part)


def _openai_part(tally: _Tally, part: Any) -> None:
    kind = _field(part, "type")
    if kind in {"text", "input_text", "output_text"}:
        tally.text(part.get("text"))
    elif kind == "refusal":
        tally.text(part.get("refusal"))
    elif kind in {"image_url", "input_image"}:
        tally.images += 1
    elif kind == "file":  # Chat Completions: {"file": {"file_data": "data:…;base64,…"}}
        file = part.get("file")
        if _field(file, "file_data") is not None:
            tally.base64(file.get("file_data"))
            tally.text(file.get("filename"))
        else:
            tally.json(file)
    elif kind == "input_file" and part.get("file_data") is not None:  # Responses
        tally.base64(part.get("file_data"))
        tally.text(part.get("filename"))
    elif kind == "input_audio":
        tally.base64(_field(part.get("input_audio"), "data"))
    else:
        tally.json(part)


_TOOL_FIELDS = frozenset({"type", "name", "description", "parameters", "format", "strict"})


def _openai_tool(tally: _Tally, tool: Any) -> None:
    inner = _field(tool, "function") or _field(tool, "custom") or tool
    if not isinstance(inner, dict) or "name" not in inner:
        tally.json(tool)  # a built-in tool (web search, file search, …): its settings
        return
    tally.text(inner.get("name"))
    tally.text(inner.get("description"))
    tally.json(inner.get("parameters"))
    tally.json(inner.get("format"))
    # Anything more a tool carries (a namespace's own tools, say) reaches the model too.
    rest = {key: value for key, value in inner.items() if key not in _TOOL_FIELDS}
    if rest:
        tally.json(rest)


def _chat(tally: _Tally, body: dict[str, Any]) -> None:
    for message in _items(body.get("messages")):
        if not isinstance(message, dict):
            tally.json(message)
            continue
        _openai_content(tally, message.get("content"))
        tally.text(message.get("refusal"))
        for call in [*_items(message.get("tool_calls")), message.get("function_call")]:
            function = _field(call, "function") or _field(call, "custom") or call
            tally.text(_field(function, "name"))
            tally.text(_field(function, "arguments") or _field(function, "input"))
    for tool in [*_items(body.get("tools")), *_items(body.get("functions"))]:
        _openai_tool(tally, tool)
    tally.json(_field(body.get("response_format"), "json_schema"))


def _responses(tally: _Tally, body: dict[str, Any]) -> None:
    _openai_content(tally, body.get("instructions"))
    given = body.get("input")
    for item in given if isinstance(given, list) else [given]:
        _responses_item(tally, item)
    for tool in _items(body.get("tools")):
        _openai_tool(tally, tool)
    tally.json(_field(_field(body.get("text"), "format"), "schema"))


def _responses_item(tally: _Tally, item: Any) -> None:
    kind = _field(item, "type")
    if kind in {None, "message"} and isinstance(item, dict):
        _openai_content(tally, item.get("content"))
    elif kind in {"function_call", "custom_tool_call"}:
        tally.text(item.get("name"))
        tally.text(item.get("arguments") if kind == "function_call" else item.get("input"))
    elif kind in {"function_call_output", "custom_tool_call_output"}:
        _openai_content(tally, item.get("output"))
    elif kind == "reasoning":
        for part in _items(item.get("summary")):
            tally.text(_field(part, "text"))
        tally.text(item.get("encrypted_content"))
    elif kind is None:
        tally.text(item)  # a bare string input
    else:
        tally.json(item)


# Gemini: systemInstruction and contents[] of parts, tools[].functionDeclarations[].


def _gemini_parts(tally: _Tally, content: Any) -> None:
    parts = _field(content, "parts") if isinstance(content, dict) else content
    if not isinstance(parts, list):
        tally.text(parts)
        return
    for part in parts:
        _gemini_part(tally, part)


def _gemini_part(tally: _Tally, part: Any) -> None:
    if not isinstance(part, dict):
        tally.json(part)
        return
    for name, value in part.items():
        if name == "text":
            tally.text(value)
        elif name == "inlineData" and str(_field(value, "mimeType") or "").startswith("image/"):
            tally.images += 1
        elif name == "inlineData":  # a document, audio or video sent inline: its base64 bytes
            tally.base64(_field(value, "data"))
        elif name in {"functionCall", "functionResponse"}:
            tally.text(_field(value, "name"))
            tally.json(_field(value, "args" if name == "functionCall" else "response"))
        elif name in {"thought", "thoughtSignature"}:
            continue  # a flag, and an opaque signature the model does not read as text
        else:
            tally.json({name: value})


def _gemini(tally: _Tally, body: dict[str, Any]) -> None:
    _gemini_parts(tally, body.get("systemInstruction"))
    for content in _items(body.get("contents")):
        _gemini_parts(tally, content)
    for tool in _items(body.get("tools")):
        declarations = _field(tool, "functionDeclarations")
        if not isinstance(declarations, list):
            tally.json(tool)  # a built-in tool (search, code execution, …): its settings
            continue
        for declaration in declarations:
            tally.text(_field(declaration, "name"))
            tally.text(_field(declaration, "description"))
            tally.json(_field(declaration, "parameters"))
            tally.json(_field(declaration, "parametersJsonSchema"))
            tally.json(_field(declaration, "response"))
    config = body.get("generationConfig")
    tally.json(_field(config, "responseSchema"))
    tally.json(_field(config, "responseJsonSchema"))


_WALKERS = {
    "messages": _anthropic,
    "chat_completions": _chat,
    "responses": _responses,
    "generate_content": _gemini,
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
    tally = _Tally()
    try:
        _WALKERS[route.kind](tally, document)
    except RecursionError as exc:
        raise RequestRefused("the request body nests too deeply to be estimated") from exc
    user_id = _field(document.get("metadata"), "user_id") if route.provider == "anthropic" else None
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
    )
