"""OpenAI's wire format: Chat Completions and Responses estimates and usage.

Chat Completions ``messages`` and Responses ``input`` share their content part
kinds; a response reports ``usage`` in its JSON body, in a Chat stream's last
chunk (when asked for), or in a Responses stream's terminal event.
"""

from typing import Any, ClassVar

from ledger.core.server_tools import OPENAI_SEARCH_FIELD
from ledger.providers.reader import UsageReader
from ledger.providers.sse import ServerSentEvent
from ledger.providers.tally import Tally, field, items


def _openai_content(tally: Tally, content: Any) -> None:
    if isinstance(content, str) or not isinstance(content, list):
        tally.text(content)
        return
    for part in content:
        _openai_part(tally, part)


def _openai_part(tally: Tally, part: Any) -> None:
    kind = field(part, "type")
    if kind in {"text", "input_text", "output_text"}:
        tally.text(part.get("text"))
    elif kind == "refusal":
        tally.text(part.get("refusal"))
    elif kind in {"image_url", "input_image"}:
        if _openai_image_by_reference(part):
            tally.unseen += 1
        tally.images += 1
    elif kind == "file":  # Chat Completions: {"file": {"file_data": "data:…;base64,…"}}
        file = part.get("file")
        if field(file, "file_data") is not None:
            tally.base64(file.get("file_data"))
            tally.text(file.get("filename"))
        else:
            tally.unseen += 1  # a file_id: the file is the provider's
            tally.json(file)
    elif kind == "input_file" and part.get("file_data") is not None:  # Responses
        tally.base64(part.get("file_data"))
        tally.text(part.get("filename"))
    elif kind == "input_file":  # a file_id or file_url: fetched by the provider
        tally.unseen += 1
        tally.json(part)
    elif kind == "input_audio":
        tally.base64(field(part.get("input_audio"), "data"))
    else:
        tally.json(part)


_TOOL_FIELDS = frozenset({"type", "name", "description", "parameters", "format", "strict"})


def _openai_image_by_reference(part: dict[str, Any]) -> bool:
    """Whether an image part points at an image (URL or file id) instead of holding it."""
    if part.get("file_id") is not None:
        return True
    url = part.get("image_url")
    if isinstance(url, dict):
        url = url.get("url")
    return not (isinstance(url, str) and url.startswith("data:"))


def _openai_tool(tally: Tally, tool: Any) -> None:
    inner = field(tool, "function") or field(tool, "custom") or tool
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


def tally_chat_request(tally: Tally, body: dict[str, Any]) -> None:
    """Count a Chat Completions request's messages, tools and schema into ``tally``."""
    for message in items(body.get("messages")):
        if not isinstance(message, dict):
            tally.json(message)
            continue
        _openai_content(tally, message.get("content"))
        tally.text(message.get("refusal"))
        for call in [*items(message.get("tool_calls")), message.get("function_call")]:
            function = field(call, "function") or field(call, "custom") or call
            tally.text(field(function, "name"))
            tally.text(field(function, "arguments") or field(function, "input"))
    for tool in [*items(body.get("tools")), *items(body.get("functions"))]:
        _openai_tool(tally, tool)
    tally.json(field(body.get("response_format"), "json_schema"))


def tally_responses_request(tally: Tally, body: dict[str, Any]) -> None:
    """Count a Responses request's instructions, input, tools and schema into ``tally``."""
    _openai_content(tally, body.get("instructions"))
    given = body.get("input")
    for item in given if isinstance(given, list) else [given]:
        _responses_item(tally, item)
    for tool in items(body.get("tools")):
        _openai_tool(tally, tool)
    tally.json(field(field(body.get("text"), "format"), "schema"))


def _responses_item(tally: Tally, item: Any) -> None:
    kind = field(item, "type")
    if kind in {None, "message"} and isinstance(item, dict):
        _openai_content(tally, item.get("content"))
    elif kind in {"function_call", "custom_tool_call"}:
        tally.text(item.get("name"))
        tally.text(item.get("arguments") if kind == "function_call" else item.get("input"))
    elif kind in {"function_call_output", "custom_tool_call_output"}:
        _openai_content(tally, item.get("output"))
    elif kind == "reasoning":
        for part in items(item.get("summary")):
            tally.text(field(part, "text"))
        tally.text(item.get("encrypted_content"))
    elif kind is None:
        tally.text(item)  # a bare string input
    else:
        tally.json(item)


class ChatUsageReader(UsageReader):
    """OpenAI Chat Completions responses."""

    provider = "openai"

    def _event(self, event: ServerSentEvent) -> None:
        if event.data.strip() == "[DONE]":
            self.finished = True
            return
        super()._event(event)

    def _data(self, data: dict[str, Any]) -> None:
        self._take_ids(data)
        self._set_usage(data.get("usage"))


class ResponsesUsageReader(UsageReader):
    """OpenAI Responses API responses."""

    provider = "openai"
    _TERMINAL: ClassVar[frozenset[str]] = frozenset(
        {"response.completed", "response.incomplete", "response.failed"}
    )

    def _data(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        response = data.get("response")
        if not isinstance(response, dict):
            return
        self._take_ids(response)
        self._set_usage(response.get("usage"))
        self._count_server_tools(response)
        if kind == "response.failed":
            self._take_error(response)
        if kind in self._TERMINAL:
            self.finished = True

    def _count_server_tools(self, response: dict[str, Any]) -> None:
        # OpenAI bills each web search call, and lists them as output items only.
        output = response.get("output")
        items = output if isinstance(output, list) else []
        searches = sum(1 for item in items if _field_type(item) == "web_search_call")
        if searches and self._usage is not None:
            self._usage[OPENAI_SEARCH_FIELD] = searches


def _field_type(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else None
