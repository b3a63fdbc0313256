"""A local upstream that answers like the Anthropic, OpenAI and Gemini APIs, run as its own process.

``python -m tests.gateway.upstream`` prints its port on stdout once it listens.
Model calls are answered as JSON or SSE (``"stream": true``; Gemini's
``:streamGenerateContent`` with ``?alt=sse``, else one JSON array). A request header
``x-test-scenario`` picks the misbehaviour:

- ``status:429`` (any status): an error body in the provider's shape;
- ``pause:NAME``: an SSE stream that waits before each event after the first
  until the test releases it (``POST /_control/release/NAME``, one event per
  release), so a test can show an event reached the client before the next
  one was sent, without timing anything;
- ``whole:NAME``: an SSE stream whose events all go in one write once the test
  releases it (the headers go at once), as a fast upstream's often arrive;
- ``error``: an SSE stream with an ``error`` event after ``message_start``;
- ``cut``: an SSE stream whose connection is dropped after ``message_start``;
- ``huge``: the stream's usage-carrying final event (``message_delta``, the
  chat usage chunk, ``response.completed``) padded past 17 MiB;
- ``badjson``: that event's data cut off mid-JSON;
- ``search:N``: the answer reports N server-side web searches (Anthropic
  ``usage.server_tool_use``, OpenAI Responses ``web_search_call`` output items).

``GET /_control/requests`` lists every request that reached it (path, query,
headers, body); ``/_control/*`` is never forwarded by the gateway.

``POST /_control/refuse`` makes every later model call a 402 in the provider's
shape (as the gateway refuses a halt), to see what a client does with one.

Started with ``--agent``, it answers every model call in the scripted agent
mode of ``tests.gateway.agent_mode`` (a tool call per turn, for as many turns
as the client goes on), and ``GET /_control/calls`` lists each answer with its
usage.
"""

import itertools
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.gateway import agent_mode

# Small round figures, so each call's exact cost is easy to state in a test.
ANTHROPIC_USAGE = {"input_tokens": 1000, "output_tokens": 700}
CHAT_USAGE = {"prompt_tokens": 2000, "completion_tokens": 500, "total_tokens": 2500}
RESPONSES_USAGE = {"input_tokens": 3000, "output_tokens": 900, "total_tokens": 3900}
GEMINI_USAGE = {
    "promptTokenCount": 4000, "cachedContentTokenCount": 1000, "candidatesTokenCount": 300,
    "thoughtsTokenCount": 200, "totalTokenCount": 4500,
}  # fmt: skip

_ids = itertools.count(1)
_gates: dict[str, threading.Semaphore] = {}
_gates_lock = threading.Lock()
_requests: list[dict[str, Any]] = []
_mode = {"agent": False, "refuse": False}


def _budget_error(path: str) -> dict[str, Any]:
    """A 402 in the provider's error shape, as the gateway answers a halt."""
    message = "ledger: halt-100 (test refusal); the request was not sent"
    if path.startswith("/v1/messages"):
        return {"type": "error", "error": {"type": "budget_exceeded", "message": message}}
    if path.startswith("/v1beta/"):
        return {"error": {"code": 402, "message": message, "status": "FAILED_PRECONDITION"}}
    return {"error": {"type": "budget_exceeded", "code": "budget_exceeded", "message": message}}


def _gate(name: str) -> threading.Semaphore:
    with _gates_lock:
        return _gates.setdefault(name, threading.Semaphore(0))


def anthropic_events(
    model: str, message_id: str, usage: dict[str, Any] = ANTHROPIC_USAGE
) -> list[tuple[str, dict[str, Any]]]:
    start_usage = {**usage, "output_tokens": 1}
    message: dict[str, Any] = {
        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": start_usage,
    }  # fmt: skip
    return [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "hello"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": usage["output_tokens"]}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip


def anthropic_message(
    model: str, message_id: str, usage: dict[str, Any] = ANTHROPIC_USAGE
) -> dict[str, Any]:
    return {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": usage,
    }  # fmt: skip


def chat_completion(
    model: str, completion_id: str, usage: dict[str, Any] = CHAT_USAGE
) -> dict[str, Any]:
    return {
        "id": completion_id, "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"},
                     "finish_reason": "stop"}],
        "usage": usage,
    }  # fmt: skip


def chat_chunks(
    model: str, completion_id: str, *, with_usage: bool, usage: dict[str, Any] = CHAT_USAGE
) -> list[dict[str, Any]]:
    """A chat stream; its usage comes only when asked for (``stream_options.include_usage``)."""
    base = {"id": completion_id, "object": "chat.completion.chunk", "created": 1, "model": model}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hel"},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
    ]  # fmt: skip
    if with_usage:
        chunks.append({**base, "choices": [], "usage": usage})
    return chunks


def response_document(
    model: str, response_id: str, usage: dict[str, Any] = RESPONSES_USAGE
) -> dict[str, Any]:
    return {
        "id": response_id, "object": "response", "created_at": 1, "model": model,
        "status": "completed",
        "output": [{"type": "message", "id": "m1", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": "hello", "annotations": []}]}],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage,
    }  # fmt: skip


def response_events(model: str, response_id: str) -> list[tuple[str, dict[str, Any]]]:
    done = response_document(model, response_id)
    started = {**done, "status": "in_progress", "output": [], "usage": None}
    return [
        ("response.created", {"type": "response.created", "sequence_number": 0,
                              "response": started}),
        ("response.output_text.delta", {"type": "response.output_text.delta",
                                        "sequence_number": 1, "item_id": "m1",
                                        "output_index": 0, "content_index": 0,
                                        "delta": "hello", "logprobs": []}),
        ("response.completed", {"type": "response.completed", "sequence_number": 2,
                                "response": done}),
    ]  # fmt: skip


def gemini_chunks(model: str, response_id: str) -> list[dict[str, Any]]:
    """A Gemini stream: usage so far on each chunk, finishReason and the whole usage on the last."""
    base = {"modelVersion": model, "responseId": response_id}
    started = {"promptTokenCount": 4000, "totalTokenCount": 4200, "thoughtsTokenCount": 200}
    return [
        {**base, "candidates": [{"content": {"parts": [{"text": "hel"}], "role": "model"},
                                 "index": 0}], "usageMetadata": started},
        {**base, "candidates": [{"content": {"parts": [{"text": "lo"}], "role": "model"},
                                 "finishReason": "STOP", "index": 0}],
         "usageMetadata": GEMINI_USAGE},
    ]  # fmt: skip


def gemini_response(model: str, response_id: str) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"parts": [{"text": "hello"}], "role": "model"},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": GEMINI_USAGE, "modelVersion": model, "responseId": response_id,
    }  # fmt: skip


HUGE_PADDING = 17 * 1024 * 1024
_USAGE_EVENT = {"/v1/messages": -2, "/v1/chat/completions": -2, "/v1/responses": -1}


def spoil_usage_event(path: str, events: list[str], scenario: str) -> list[str]:
    """``events`` with the one carrying the final usage made unreadable (``huge``, ``badjson``)."""
    if scenario not in {"huge", "badjson"}:
        return events
    index = _USAGE_EVENT[path]
    name, _, data = events[index].rstrip("\n").rpartition("data: ")
    if scenario == "huge":
        document = json.loads(data)
        document["padding"] = "x" * HUGE_PADDING
        data = json.dumps(document)
    else:
        data = data[: len(data) // 2]
    spoiled = list(events)
    spoiled[index] = f"{name}data: {data}\n\n"
    return spoiled


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *_args: Any) -> None:
        return

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/_control/requests":
            self._json(200, {"requests": list(_requests)})
            return
        if path == "/_control/calls":
            self._json(200, {"calls": list(agent_mode.calls)})
            return
        self._note(b"")
        if path == "/v1/models":
            self._json(200, {"data": [{"id": "claude-test", "type": "model"}], "object": "list"})
            return
        if path == "/v1beta/models":
            self._json(200, {"models": [{"name": "models/gemini-test"}]})
            return
        self._json(404, {"error": {"type": "not_found", "message": path}})

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if parts.path == "/_control/refuse":
            # From now on every model call is refused as a spent budget is (402).
            _mode["refuse"] = True
            self._json(200, {"refusing": True})
            return
        if parts.path.startswith("/_control/release/"):
            _gate(parts.path.rsplit("/", 1)[1]).release()
            self._json(200, {"released": True})
            return
        self._note(body)
        request = json.loads(body or b"{}")
        scenario = self.headers.get("x-test-scenario", "")
        model = request.get("model", "m")
        number = next(_ids)
        if _mode["refuse"] and parts.path != "/v1/messages/count_tokens":
            self._json(402, _budget_error(parts.path))
            return
        if _mode["agent"] and self._agent_answer(parts.path, request):
            return
        if scenario.startswith("status:"):
            status = int(scenario.split(":", 1)[1])
            if parts.path.startswith("/v1/messages"):
                error = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
            elif parts.path.startswith("/v1beta/"):
                error = {"error": {"code": status, "message": "busy", "status": "UNAVAILABLE"}}
            else:
                error = {"error": {"type": "server_error", "code": None, "message": "busy"}}
            self._json(status, error)
        elif parts.path.startswith("/v1beta/models/"):
            self._gemini(parts.path, parts.query)
        elif parts.path == "/v1/messages/count_tokens":
            self._json(200, {"input_tokens": 12})
        elif parts.path == "/v1/messages" and scenario.startswith("search:"):
            message = anthropic_message(model, f"msg_{number:06d}")
            searches = {"web_search_requests": int(scenario.split(":", 1)[1])}
            self._json(200, {**message, "usage": {**ANTHROPIC_USAGE, "server_tool_use": searches}})
        elif parts.path == "/v1/messages":
            message_id = f"msg_{number:06d}"
            if request.get("stream"):
                events = anthropic_events(model, message_id)
                self._sse([f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events])
            else:
                self._json(200, anthropic_message(model, message_id))
        elif parts.path == "/v1/chat/completions":
            completion_id = f"chatcmpl-{number:06d}"
            if request.get("stream"):
                with_usage = bool((request.get("stream_options") or {}).get("include_usage"))
                found = chat_chunks(model, completion_id, with_usage=with_usage)
                chunks = [f"data: {json.dumps(c)}\n\n" for c in found]
                self._sse([*chunks, "data: [DONE]\n\n"])
            else:
                self._json(200, chat_completion(model, completion_id))
        elif parts.path == "/v1/responses" and scenario.startswith("search:"):
            document = response_document(model, f"resp_{number:06d}")
            calls = [{"type": "web_search_call", "id": f"ws_{index}", "status": "completed"}
                     for index in range(int(scenario.split(":", 1)[1]))]  # fmt: skip
            self._json(200, {**document, "output": [*calls, *document["output"]]})
        elif parts.path == "/v1/responses":
            response_id = f"resp_{number:06d}"
            if request.get("stream"):
                events = response_events(model, response_id)
                self._sse([f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events])
            else:
                self._json(200, response_document(model, response_id))
        else:
            self._json(404, {"error": {"type": "not_found", "message": parts.path}})

    def _agent_answer(self, path: str, request: dict[str, Any]) -> bool:
        """Answer a model call in the scripted agent mode; False for any other path."""
        if path == "/v1/messages":
            document, events = agent_mode.anthropic(path, request)
        elif path == "/v1/responses":
            document, events = agent_mode.responses(path, request)
        elif path.startswith("/v1beta/models/") and path.endswith(
            (":generateContent", ":streamGenerateContent")
        ):
            document, events = agent_mode.gemini(path, request)
        else:
            return False
        if document is not None:
            self._json(200, document)
        else:
            self._sse(events)
        return True

    def _gemini(self, path: str, query: str) -> None:
        model, _, method = path.removeprefix("/v1beta/models/").partition(":")
        response_id = f"gemini{next(_ids):06d}"
        if method == "countTokens":
            self._json(200, {"totalTokens": 12})
        elif method == "generateContent":
            self._json(200, gemini_response(model, response_id))
        elif method == "streamGenerateContent" and "alt=sse" in query:
            chunks = gemini_chunks(model, response_id)
            self._sse([f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in chunks])
        elif method == "streamGenerateContent":
            self._json(200, gemini_chunks(model, response_id))
        else:
            self._json(404, {"error": {"code": 404, "message": path, "status": "NOT_FOUND"}})

    def _note(self, body: bytes) -> None:
        parts = urlsplit(self.path)
        _requests.append(
            {
                "path": parts.path,
                "query": parts.query,
                "headers": {name.lower(): value for name, value in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
            }
        )

    def _json(self, status: int, document: dict[str, Any] | list[Any]) -> None:
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[str]) -> None:
        scenario = self.headers.get("x-test-scenario", "")
        events = spoil_usage_event(urlsplit(self.path).path, events, scenario)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if scenario.startswith("whole:"):
            _gate(scenario.split(":", 1)[1]).acquire()
            self.wfile.write("".join(events).encode())
            self.wfile.flush()
            return
        for index, event in enumerate(events):
            if index and scenario.startswith("pause:"):
                _gate(scenario.split(":", 1)[1]).acquire()
            self.wfile.write(event.encode())
            self.wfile.flush()
            if index == 0 and scenario == "error":
                error = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
                self.wfile.write(f"event: error\ndata: {json.dumps(error)}\n\n".encode())
                self.wfile.flush()
                return
            if index == 0 and scenario == "cut":
                self.connection.shutdown(socket.SHUT_RDWR)
                return


class Server(ThreadingHTTPServer):
    request_queue_size = 1024  # the default 5 drops connections of a busy benchmark
    daemon_threads = True


def main() -> None:
    _mode["agent"] = "--agent" in sys.argv[1:]
    server = Server(("127.0.0.1", 0), Handler)
    sys.stdout.write(f"{server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
