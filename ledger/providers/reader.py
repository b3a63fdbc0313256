"""A response's usage, read from its JSON body or from its SSE stream event by event.

Each provider reports usage its own way:

- Anthropic Messages: a JSON ``message`` with ``usage``; a stream opens with
  ``message_start`` (``message.usage``: input and cache counts, the first output
  count), its ``message_delta`` events carry cumulative ``usage`` fields that
  replace the earlier ones, ``message_stop`` ends it, and an ``error`` event
  reports a failure mid-stream.
- OpenAI Chat Completions: a JSON ``chat.completion`` with ``usage``; a stream's
  chunks carry ``usage`` only in the last one (when the request asked for it
  with ``stream_options.include_usage``), then ``data: [DONE]``.
- OpenAI Responses: a JSON ``response`` with ``usage``; a stream ends with
  ``response.completed``, ``response.incomplete`` or ``response.failed``, whose
  ``response.usage`` is the whole call's.
- Gemini: a JSON ``GenerateContentResponse`` with ``usageMetadata`` and
  ``responseId``; a stream (``alt=sse``) is a series of them, each with the
  call's usage so far, the last one carrying a candidate's ``finishReason``.
  Without ``alt=sse`` a stream is one JSON array of them.

``usage`` is the provider's own usage object, in the shape ``ledger record
--usage-json`` reads. ``unreadable`` says that part of the answer could not be
read (a body or event that is not JSON, an event over the size limit), and
``content_began`` that an event past the opening one came: together with
``finished`` and ``error`` they are what ``ledger.core.settlement`` settles
on. Data that is not what the provider documents is never an exception here:
a reader only reports what it saw, and the caller records it.
"""

import json
from typing import Any, ClassVar

from ledger.core.response_keys import response_key
from ledger.core.settlement import CallEnd
from ledger.providers.routes import Route
from ledger.providers.sse import ServerSentEvent, SSEDecoder

# Each route kind's reader class, filled by ``ledger.providers.usage``.
READERS: dict[str, type["UsageReader"]] = {}


class UsageReader:
    """Usage, ids and the outcome of one response, fed as JSON or as SSE bytes."""

    # Whose responses these are (the key prefix); an OpenAI-compatible provider's name.
    provider: str = ""
    # Events that open an answer and carry no content; "ping" is a keep-alive.
    _OPENING: ClassVar[frozenset[str]] = frozenset(
        {"message_start", "ping", "response.created", "response.in_progress"}
    )

    def __init__(self) -> None:
        self._decoder = SSEDecoder()
        self._usage: dict[str, Any] | None = None
        self.response_id: str | None = None
        self.model: str | None = None
        # The tier the provider says it served the call at (OpenAI's response field).
        self.service_tier: str | None = None
        self.error: str | None = None
        self.finished = False
        self._unreadable = False
        self.content_began = False

    @property
    def unreadable(self) -> bool:
        """Whether part of the answer could not be read (not JSON, or over the size limit)."""
        return self._unreadable or self._decoder.dropped > 0

    @staticmethod
    def for_route(route: Route) -> "UsageReader":
        """A reader for responses of ``route`` (a model call).

        Each provider's reader lives in its own module and is registered by
        ``ledger.providers.usage``, which imports them (this module imports none).

        Raises:
            ValueError: the route is not a model call.
        """
        if route.kind not in READERS:
            raise ValueError(f"no usage to read for a {route.kind} route")
        reader = READERS[route.kind]()
        reader.provider = route.provider
        return reader

    def end(self, status: int | None) -> CallEnd:
        """How the answer ended, for the settlement rule (``status`` None: never reached)."""
        return CallEnd(
            status=status, finished=self.finished, error=self.error is not None,
            content_began=self.content_began, unreadable=self.unreadable,
            has_usage=self._usage is not None,
        )  # fmt: skip

    @property
    def usage(self) -> dict[str, Any] | None:
        """The usage received so far (a copy), or ``None`` when none was.

        A response's own ``service_tier`` (OpenAI's is beside its usage) is
        added to it, so the record prices the call at the tier it was served at.
        """
        if self._usage is None:
            return None
        usage = dict(self._usage)
        if self.service_tier is not None and "service_tier" not in usage:
            usage["service_tier"] = self.service_tier
        return usage

    @property
    def idempotency_key(self) -> str | None:
        """The record's idempotency key from the response id (``<provider>:<id>``), if usable.

        Every part of the product that records a response (the SDK guards, the
        gateway) uses this key, so one response is never counted twice.
        """
        return response_key(self.provider, self.response_id)

    def feed_json(self, body: bytes) -> None:
        """Read a whole (non-streamed) JSON response body."""
        document = self._parsed(body)
        if not isinstance(document, dict):
            self._unreadable = True
            return
        self._take_ids(document)
        self._set_usage(document.get("usage"))
        self._count_server_tools(document)
        # A failed response may still report the usage it consumed.
        self.finished = not self._take_error(document)

    def feed_sse(self, chunk: bytes) -> None:
        """Read the next bytes of an SSE response body (split anywhere)."""
        for event in self._decoder.feed(chunk):
            self._event(event)

    def _parsed(self, body: bytes) -> Any:
        """The JSON value of ``body``; None (the answer unreadable) when it is not JSON."""
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            self._unreadable = True
            return None

    def _event(self, event: ServerSentEvent) -> None:
        try:
            data = json.loads(event.data)
        except (ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            # Providers send only JSON objects: this one may have held the usage.
            self._unreadable = self.content_began = True
            return
        if event.event == "error" or data.get("type") == "error" or data.get("error"):
            self._take_error(data)
            return
        if data.get("type") not in self._OPENING:
            self.content_began = True
        self._data(data)

    def _data(self, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def _count_server_tools(self, response: dict[str, Any]) -> None:
        """Note the server-side tool calls a whole response lists (where usage does not)."""

    def _take_ids(self, document: dict[str, Any]) -> None:
        if isinstance(document.get("id"), str):
            self.response_id = document["id"]
        if isinstance(document.get("model"), str):
            self.model = document["model"]
        if isinstance(document.get("service_tier"), str):
            self.service_tier = document["service_tier"]

    def _set_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self._usage = dict(usage)

    def _merge_usage(self, usage: Any) -> None:
        """Overlay the non-null fields of ``usage`` on what was received before."""
        if isinstance(usage, dict):
            merged = dict(self._usage or {})
            merged.update({key: value for key, value in usage.items() if value is not None})
            self._usage = merged

    def _take_error(self, document: dict[str, Any]) -> bool:
        found = document.get("error")
        if found is None and document.get("type") == "error":
            found = {"type": document.get("code"), "message": document.get("message")}
        if found is None:
            return False
        if isinstance(found, dict):
            kind = found.get("type") or found.get("code") or "error"
            message = found.get("message")
            self.error = f"{kind}: {message}" if message else str(kind)
        else:
            self.error = str(found)
        return True
