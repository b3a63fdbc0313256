"""OpenAI's wire format: the usage of Chat Completions and Responses answers.

A response reports ``usage`` in its JSON body, in a Chat stream's last chunk
(when asked for), or in a Responses stream's terminal event.
"""

from typing import Any, ClassVar

from ledger.core.server_tools import OPENAI_SEARCH_FIELD
from ledger.providers.reader import UsageReader
from ledger.providers.sse import ServerSentEvent


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
