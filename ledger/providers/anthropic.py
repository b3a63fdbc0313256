"""Anthropic's wire format: a Messages request's estimate and a response's usage.

A request's input is its ``system``, the content blocks of its ``messages``
and its ``tools``; a response reports ``usage`` in its JSON ``message``, or
across a stream's ``message_start`` and ``message_delta`` events.
"""

from typing import Any

from ledger.providers.reader import UsageReader
from ledger.providers.tally import Tally, field, items

_BY_REFERENCE = frozenset({"url", "file"})  # a source the provider fetches itself


def _anthropic_content(tally: Tally, content: Any) -> None:
    if isinstance(content, str) or not isinstance(content, list):
        tally.text(content)
        return
    for block in content:
        _anthropic_block(tally, block)


def _anthropic_block(tally: Tally, block: Any) -> None:
    kind = field(block, "type")
    if kind == "text":
        tally.text(block.get("text"))
    elif kind in {"image", "document"} and field(block.get("source"), "type") in _BY_REFERENCE:
        tally.unseen += 1
        tally.json(block.get("source"))
    elif kind == "image":
        tally.images += 1
    elif kind == "document":
        tally.text(block.get("title"))
        tally.text(block.get("context"))
        source = block.get("source")
        source_kind = field(source, "type")
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


def tally_request(tally: Tally, body: dict[str, Any]) -> None:
    """Count a Messages request's system prompt, messages and tools into ``tally``."""
    _anthropic_content(tally, body.get("system"))
    for message in items(body.get("messages")):
        if isinstance(message, dict):
            _anthropic_content(tally, message.get("content"))
        else:
            tally.json(message)
    for tool in items(body.get("tools")):
        tally.text(field(tool, "name"))
        tally.text(field(tool, "description"))
        tally.json(field(tool, "input_schema"))


class AnthropicUsageReader(UsageReader):
    """Anthropic Messages responses."""

    provider = "anthropic"

    def _data(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "message_start" and isinstance(data.get("message"), dict):
            message = data["message"]
            self._take_ids(message)
            self._merge_usage(message.get("usage"))
        elif kind == "message_delta":
            self._merge_usage(data.get("usage"))
        elif kind == "message_stop":
            self.finished = True
