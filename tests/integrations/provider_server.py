"""The fake provider run in a thread, for the SDK tests: answers like the Anthropic and
OpenAI APIs (JSON and SSE), in the shapes of ``tests.gateway.upstream`` (the same fake
run as its own process), with fuller usage objects (cache and reasoning tokens) and
misbehaviours queued by the test.
"""

import contextlib
import gzip
import itertools
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.gateway.upstream import (
    anthropic_events,
    anthropic_message,
    chat_chunks,
    chat_completion,
    response_document,
)

ANTHROPIC_USAGE = {
    "input_tokens": 1000,
    "cache_creation_input_tokens": 3000,
    "cache_creation": {"ephemeral_5m_input_tokens": 2000, "ephemeral_1h_input_tokens": 1000},
    "cache_read_input_tokens": 5000,
    "output_tokens": 700,
}
CHAT_USAGE = {
    "prompt_tokens": 2000,
    "completion_tokens": 500,
    "total_tokens": 2500,
    "prompt_tokens_details": {"cached_tokens": 1200},
    "completion_tokens_details": {"reasoning_tokens": 200},
}
RESPONSES_USAGE = {
    "input_tokens": 3000,
    "input_tokens_details": {"cached_tokens": 1000},
    "output_tokens": 900,
    "output_tokens_details": {"reasoning_tokens": 600},
    "total_tokens": 3900,
}


def _response_events(model: str, response_id: str) -> list[tuple[str, dict[str, Any]]]:
    """A Responses API stream, every event of it: usage arrives only in ``response.completed``."""
    done = response_document(model, response_id, RESPONSES_USAGE)
    started = {**done, "status": "in_progress", "output": [], "usage": None}
    item = done["output"][0]
    part = item["content"][0]
    at = {"item_id": item["id"], "output_index": 0, "content_index": 0}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": started}),
        ("response.output_item.added", {"output_index": 0,
                                        "item": {**item, "status": "in_progress", "content": []}}),
        ("response.content_part.added", {**at, "part": {**part, "text": ""}}),
        ("response.output_text.delta", {**at, "delta": "hello", "logprobs": []}),
        ("response.output_text.done", {**at, "text": "hello", "logprobs": []}),
        ("response.content_part.done", {**at, "part": part}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": done}),
    ]  # fmt: skip
    return [
        (name, {"type": name, "sequence_number": number, **data})
        for number, (name, data) in enumerate(events)
    ]


def _sse_events(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events]


OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def _status_error(path: str, status: int) -> dict[str, Any]:
    if path.endswith("/messages"):
        kind = "overloaded_error" if status == 529 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": f"status {status}"}}
    return {"error": {"message": f"status {status}", "type": "server_error", "code": None}}


class ProviderServer:
    """Serves on 127.0.0.1 in a thread; ``requests`` lists (path, body) of what reached it.

    Each model request takes the next of ``scenarios`` (default ``"ok"``):
    ``"ok"`` answers as the provider does (JSON, or SSE when the body streams);
    ``"overloaded"`` streams message_start then an ``overloaded_error`` event;
    ``"cut"`` sends part of the body and drops the connection; ``"hold"`` sends
    part of a stream and waits for ``release`` before the rest; ``"529"`` and
    ``"500"`` answer that status with the provider's error body; ``"gzip"``
    answers JSON compressed with gzip; ``"bad-usage"`` reports a negative count.
    Every response has its own id.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.scenarios: list[str] = []
        self.release = threading.Event()
        self.clients: list[Any] = []  # SDK clients to close with the server
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes: without TCP_NODELAY, Nagle's
            # algorithm and the client's delayed ACK add ~40 ms to every reply.
            disable_nagle_algorithm = True

            def log_message(self, *_args: Any) -> None:
                return

            def do_GET(self) -> None:
                server.requests.append((self.path, {}))
                self._json({"data": [], "has_more": False, "object": "list"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                path = self.path.split("?")[0]
                with server._lock:
                    server.requests.append((self.path, body))
                    scenario = server.scenarios.pop(0) if server.scenarios else "ok"
                    number = next(server._ids)
                if path.endswith("/count_tokens"):
                    self._json({"input_tokens": 7})
                    return
                if scenario in {"529", "500"}:
                    self._json(_status_error(path, int(scenario)), status=int(scenario))
                    return
                model = body.get("model", "m")
                stream = bool(body.get("stream"))
                if path.endswith("/messages"):
                    usage = {"input_tokens": -1} if scenario == "bad-usage" else ANTHROPIC_USAGE
                    message = anthropic_message(model, f"msg_{number}", usage)
                    events = anthropic_events(model, f"msg_{number}", ANTHROPIC_USAGE)
                    if scenario == "overloaded":
                        events = [events[0], ("error", OVERLOADED)]
                    self._answer(scenario, stream, message, _sse_events(events))
                elif path.endswith("/chat/completions"):
                    include = bool((body.get("stream_options") or {}).get("include_usage"))
                    completion_id = f"chatcmpl-{number}"
                    chunks = chat_chunks(model, completion_id, with_usage=include, usage=CHAT_USAGE)
                    sse = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
                    whole = chat_completion(model, completion_id, CHAT_USAGE)
                    self._answer(scenario, stream, whole, sse)
                elif path.endswith("/responses"):
                    events = _response_events(model, f"resp_{number}")
                    whole = response_document(model, f"resp_{number}", RESPONSES_USAGE)
                    self._answer(scenario, stream, whole, _sse_events(events))
                else:
                    self.send_error(404)

            def _answer(
                self, scenario: str, stream: bool, document: dict[str, Any], events: list[str]
            ) -> None:
                if scenario == "cut":
                    data = "".join(events).encode() if stream else json.dumps(document).encode()
                    kind = "text/event-stream" if stream else "application/json"
                    # Promise the whole body, send the first part, drop the connection.
                    part = "".join(events[:2]).encode() if stream else data[: len(data) // 2]
                    self.send_response(200)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(part)
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                elif stream and scenario == "hold":
                    data = "".join(events).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    head = "".join(events[:2]).encode()
                    self.wfile.write(head)
                    self.wfile.flush()
                    server.release.wait(timeout=60)
                    with contextlib.suppress(OSError):
                        self.wfile.write(data[len(head) :])
                elif stream:
                    self._sse(events)
                else:
                    self._json(document, gzipped=scenario == "gzip")

            def _json(
                self, document: dict[str, Any], status: int = 200, gzipped: bool = False
            ) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if gzipped:
                    data = gzip.compress(data)
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: list[str]) -> None:
                data = "".join(events).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def model_requests(self) -> list[tuple[str, dict[str, Any]]]:
        """The requests that reached a model endpoint."""
        return [
            (path, body) for path, body in self.requests
            if path.split("?")[0].endswith(("/messages", "/chat/completions", "/responses"))
        ]  # fmt: skip

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
