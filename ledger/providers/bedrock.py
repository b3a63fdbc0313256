"""AWS Bedrock's runtime API, as pure functions: its paths, request bodies and streams.

Paths (under the gateway's ``/bedrock`` prefix): ``POST /model/{modelId}/invoke``
and ``/invoke-with-response-stream`` carry Anthropic Messages bodies without
``model`` (the path names it; ``anthropic_version`` is in the body);
``/converse`` and ``/converse-stream`` carry Bedrock's own Converse bodies
(``system``, ``messages``, ``toolConfig``, ``inferenceConfig.maxTokens``).
``POST /model/{modelId}/count-tokens`` and the control plane's
``GET /inference-profiles…`` / ``GET /foundation-models…`` cost nothing.

Streamed answers are AWS event-stream frames
(``application/vnd.amazon.eventstream``), decoded here with botocore's own
parser: an invoke stream's ``chunk`` events each hold one Anthropic event as
base64 ``bytes`` (the last, ``message_stop``, with
``amazon-bedrock-invocationMetrics``); a Converse stream's events are
``messageStart`` … ``messageStop`` then ``metadata`` with the call's ``usage``;
an ``exception`` frame reports a failure. botocore is imported only when a
stream is read, so the gateway needs the ``[bedrock]`` extra only to serve
these routes.
"""

import base64
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, unquote

from ledger.core.settlement import CallEnd
from ledger.providers import anthropic
from ledger.providers.estimate import RequestEstimate, RequestRefused, estimate_request
from ledger.providers.routes import Route
from ledger.providers.sse import ServerSentEvent
from ledger.providers.tally import OUTPUT, SETTING, TEXT, WALKED, WINDOW, Tally, field
from ledger.providers.usage import UsageReader

PROVIDER = "bedrock"
EVENT_STREAM = "application/vnd.amazon.eventstream"
_MODEL_CALL = re.compile(
    r"^/model/([^/]+)/(invoke|invoke-with-response-stream|converse|converse-stream|count-tokens)$"
)
_CONTROL = re.compile(r"^/(inference-profiles|foundation-models)(/[^/]+)?$")
_METRICS = "amazon-bedrock-invocationMetrics"


@dataclass(frozen=True, slots=True)
class BedrockRoute:
    """A Bedrock endpoint: its kind (``messages``, ``converse`` or ``free``) and model id.

    ``control`` says the path goes to the control plane (``bedrock.{region}``),
    not the runtime.
    """

    kind: str
    model: str | None = None
    streamed: bool = False
    control: bool = False

    @property
    def is_model_call(self) -> bool:
        """Whether the endpoint runs a model (and so is gated and recorded)."""
        return self.kind != "free"


def bedrock_route(method: str, path: str) -> BedrockRoute | None:
    """The Bedrock route of ``method path`` (the path after ``/bedrock``), or ``None``.

    ``path`` is the path as sent, still escaped: an inference-profile ARN's
    ``/`` arrives as ``%2F`` and must not split the path.
    """
    verb = method.upper()
    if verb == "GET" and _CONTROL.fullmatch(path):
        return BedrockRoute("free", control=True)
    call = _MODEL_CALL.fullmatch(path)
    if call is None or verb != "POST":
        return None
    model, action = unquote(call.group(1)), call.group(2)
    if action == "count-tokens":
        return BedrockRoute("free", model)
    kind = "converse" if action.startswith("converse") else "messages"
    return BedrockRoute(kind, model, streamed=action.endswith("stream"))


def upstream_path(path: str) -> str:
    """The path as sent upstream (and signed): each segment with ``:`` unescaped.

    ``path`` is the path as the client sent it. A model id's ``:`` goes as
    itself (Claude Code sends it so; SigV4 signs the path as it is sent), and
    anything a segment holds that a path cannot (an ARN's ``/``) stays escaped.
    """
    return "/".join(quote(unquote(segment), safe=":") for segment in path.split("/"))


def error_body(message: str) -> dict[str, Any]:
    """An error body in Bedrock's shape (its type goes in ``x-amzn-ErrorType``)."""
    return {"message": message}


ERROR_TYPES = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    402: "ServiceQuotaExceededException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    413: "ValidationException",
    502: "ServiceUnavailableException",
    503: "ServiceUnavailableException",
}


# Converse request fields (Bedrock's Converse API reference), by how each counts.
# Any other field, and stored prompts (``promptVariables`` fill a prompt the body
# does not show), count as the model's context window.
CONVERSE_FIELDS: dict[str, str] = {
    "system": WALKED,
    "messages": WALKED,
    "toolConfig": WALKED,
    "inferenceConfig": OUTPUT,
    "guardrailConfig": SETTING,
    "additionalModelResponseFieldPaths": SETTING,
    "requestMetadata": SETTING,
    "performanceConfig": SETTING,
    "additionalModelRequestFields": TEXT,
    "promptVariables": WINDOW,
}


def estimate_bedrock(
    found: BedrockRoute,
    body: bytes,
    *,
    default_output_limit: int | None,
    headers: Iterable[tuple[str, str]] = (),
) -> RequestEstimate:
    """The estimate of an invoke or Converse request to ``found.model``.

    An invoke's ``anthropic-beta`` headers count as its body's betas do.

    Raises:
        RequestRefused: the body is not a JSON object, or states no output limit
            (and no default is given).
    """
    assert found.model is not None  # noqa: S101 - a model call names its model
    document = _document(body)
    if found.kind == "messages":
        # The Messages reader, with the path's model; the body goes on without it.
        probe = json.dumps({**document, "model": found.model}).encode("utf-8")
        estimate = estimate_request(
            Route(PROVIDER, "messages", streamed=found.streamed),
            probe,
            default_output_limit=default_output_limit,
            headers=headers,
        )
        estimate.document.pop("model", None)
        user_id = field(document.get("metadata"), "user_id")
        return replace(
            estimate,
            stream=found.streamed,
            metadata_user_id=user_id if isinstance(user_id, str) else None,
        )
    stated = _converse_limit(document)
    if stated is None and default_output_limit is None:
        raise RequestRefused("a Converse request needs inferenceConfig.maxTokens; it was not sent")
    limit = stated if stated is not None else default_output_limit
    assert limit is not None  # noqa: S101 - one of the two is given
    tally = Tally()
    tally.fields(document, CONVERSE_FIELDS, "request")
    for name in ("system", "messages", "toolConfig"):
        # Each block as its whole JSON text: over-counted, never free.
        if document.get(name) is not None:
            tally.json(document[name])
    return RequestEstimate(
        provider=PROVIDER, model=found.model, input_tokens=tally.input_tokens,
        max_output_tokens=limit, stream=found.streamed, metadata_user_id=None,
        output_limit=limit, limit_given=stated is not None, document=document,
        unseen_input=tally.unseen > 0, window_reasons=tuple(tally.reasons),
    )  # fmt: skip


def _document(body: bytes) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RequestRefused(f"the request body is not JSON ({type(exc).__name__})") from exc
    if not isinstance(document, dict):
        raise RequestRefused("the request body is not a JSON object")
    return document


def _converse_limit(document: dict[str, Any]) -> int | None:
    value = field(document.get("inferenceConfig"), "maxTokens")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def limited_converse_body(document: dict[str, Any], tokens: int) -> bytes:
    """The Converse body with ``inferenceConfig.maxTokens`` set to ``tokens``."""
    config = document.get("inferenceConfig")
    document["inferenceConfig"] = {
        **(config if isinstance(config, dict) else {}),
        "maxTokens": tokens,
    }
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


class _FrameReader:
    """Event-stream frames out of bytes split anywhere (botocore's parser)."""

    def __init__(self) -> None:
        from botocore.eventstream import EventStreamBuffer

        self._buffer = EventStreamBuffer()
        self.offset = 0  # the stream offset just past the last whole frame

    def feed(self, chunk: bytes) -> list[tuple[int, dict[str, Any], bytes]]:
        """The frames ``chunk`` completes: each one's end offset, headers and payload."""
        from botocore.eventstream import ParserError

        self._buffer.add_data(chunk)
        frames = []
        try:
            for message in self._buffer:
                self.offset += message.prelude.total_length
                frames.append((self.offset, dict(message.headers), bytes(message.payload)))
        except ParserError:
            frames.append((-1, {}, b""))  # not an event stream: the rest is unreadable
        return frames


class _EventStreamReading:
    """What both Bedrock stream readers share: frames in, events out, the end marked."""

    def _start_frames(self) -> None:
        self._frames: _FrameReader | None = None
        self.broken = False

    def feed_frames(self, chunk: bytes) -> list[tuple[int, bool]]:
        """Read the next bytes of an event stream (split anywhere).

        Returns each frame they complete as its end offset in the stream and
        whether the stream had ended once it was read.
        """
        if self._frames is None:
            self._frames = _FrameReader()
        ends = []
        for end, headers, payload in self._frames.feed(chunk) if not self.broken else ():
            if end < 0:
                self.broken = True
                self._mark_unreadable()
                break
            self._frame(headers, payload)
            ends.append((end, self.ended))
        return ends

    def feed_sse(self, chunk: bytes) -> None:
        """A Bedrock stream is never SSE: its bytes are read as frames."""
        self.feed_frames(chunk)

    def _frame(self, headers: dict[str, Any], payload: bytes) -> None:
        raise NotImplementedError

    def _mark_unreadable(self) -> None:
        raise NotImplementedError

    @property
    def ended(self) -> bool:
        """Whether the stream's terminal frame (the usage, or an exception) was read."""
        raise NotImplementedError


def _exception(headers: dict[str, Any], payload: bytes) -> str | None:
    """The failure an ``exception`` (or ``error``) frame reports, or ``None``."""
    kind = headers.get(":message-type")
    if kind not in {"exception", "error"}:
        return None
    name = headers.get(":exception-type") or headers.get(":error-code") or "exception"
    try:
        message = json.loads(payload).get("message")
    except (ValueError, AttributeError, RecursionError):
        message = None
    return f"{name}: {message}" if message else str(name)


class InvokeStreamReader(_EventStreamReading, anthropic.AnthropicUsageReader):
    """An invoke answer: JSON as Messages, a stream as Messages events in frames.

    Its key is the Anthropic response's own (``anthropic:<message id>``, as the
    reader of the Messages API gives it): the same response read from Claude
    Code's transcript, or by an SDK guard, is then the same record.
    """

    def __init__(self) -> None:
        super().__init__()
        self._start_frames()
        self._metrics: dict[str, Any] | None = None

    def _mark_unreadable(self) -> None:
        self._unreadable = True

    @property
    def ended(self) -> bool:
        """Whether the terminal frame (the usage, or an exception) was read."""
        return self.finished or self.error is not None

    def _frame(self, headers: dict[str, Any], payload: bytes) -> None:
        failure = _exception(headers, payload)
        if failure is not None:
            self.error = failure
            return
        if headers.get(":event-type") != "chunk":
            return
        try:
            data = base64.b64decode(json.loads(payload)["bytes"], validate=True)
        except (ValueError, KeyError, TypeError, RecursionError):
            self._unreadable = self.content_began = True
            return
        self._event(ServerSentEvent(event="message", data=data.decode("utf-8", "replace"), id=""))

    def _data(self, data: dict[str, Any]) -> None:
        metrics = data.get(_METRICS)
        if isinstance(metrics, dict):
            self._metrics = metrics
        super()._data(data)

    @property
    def usage(self) -> dict[str, Any] | None:
        """The events' usage, else Bedrock's ``invocationMetrics`` counts."""
        found = super().usage
        if found is None and self._metrics is not None:
            # Bedrock's own count, when the events carried none.
            return {
                "input_tokens": self._metrics.get("inputTokenCount"),
                "output_tokens": self._metrics.get("outputTokenCount"),
                "cache_read_input_tokens": self._metrics.get("cacheReadInputTokenCount"),
                "cache_creation_input_tokens": self._metrics.get("cacheWriteInputTokenCount"),
            }
        return found

    def end(self, status: int | None) -> CallEnd:
        """How the answer ended; ``invocationMetrics`` counts as usage too."""
        return replace(super().end(status), has_usage=self.usage is not None)


class ConverseReader(_EventStreamReading, UsageReader):
    """A Converse answer: JSON with ``usage``, or a stream ending in a ``metadata`` event."""

    def __init__(self) -> None:
        super().__init__()
        self.provider = PROVIDER
        self._start_frames()

    def _mark_unreadable(self) -> None:
        self._unreadable = True

    @property
    def ended(self) -> bool:
        """Whether the terminal frame (the usage, or an exception) was read."""
        return self.finished or self.error is not None

    def feed_json(self, body: bytes) -> None:
        """Read a whole Converse answer (``output`` and ``usage``, or Bedrock's error)."""
        document = self._parsed(body)
        if not isinstance(document, dict):
            self._unreadable = True
            return
        self._set_usage(document.get("usage"))
        if "output" in document:
            self.finished = True
        elif isinstance(document.get("message"), str):
            self.error = document["message"]

    def _frame(self, headers: dict[str, Any], payload: bytes) -> None:
        failure = _exception(headers, payload)
        if failure is not None:
            self.error = failure
            return
        kind = headers.get(":event-type")
        if kind not in {"messageStart", None}:
            self.content_began = True
        if kind != "metadata":
            return
        try:
            data = json.loads(payload)
        except (ValueError, RecursionError):
            self._unreadable = True
            return
        if isinstance(data, dict):
            self._set_usage(data.get("usage"))
        self.finished = True

    def _data(self, data: dict[str, Any]) -> None:
        """Converse answers are never SSE."""
