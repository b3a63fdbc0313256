"""The fake provider: answers like the Anthropic, OpenAI and Gemini APIs, in a thread or a process.

``FakeProvider()`` serves in a thread of the test; ``python -m tests.fakes.provider``
serves as its own process and prints its port on stdout once it listens
(``tests.gateway.helpers.start_upstream``). Model calls are answered as JSON or
SSE (``"stream": true``; Gemini's ``:streamGenerateContent`` with ``?alt=sse``,
else one JSON array). Each call's scenario is its ``x-test-scenario`` header, or
else the next one a test queued on ``FakeProvider.scenarios``:

- ``status:429`` (any status): an error body in the provider's shape;
- ``pause:NAME``: an SSE stream that waits before each event after the first
  until the test releases it (``POST /_control/release/NAME``, one event per
  release), so a test can show an event reached the client before the next
  one was sent, without timing anything; ``hold`` is ``pause:hold``, released
  when an in-thread fake closes;
- ``whole:NAME``: an SSE stream whose events all go in one write once the test
  releases it (the headers go at once), as a fast upstream's often arrive;
- ``error``: an SSE stream with an ``error`` event after its first event;
- ``cut``: an SSE stream dropped after its first event, or a JSON body halfway,
  short of the length it promised;
- ``huge``: the stream's usage-carrying final event (``message_delta``, the
  chat usage chunk, ``response.completed``) padded past 17 MiB;
- ``badjson``: that event's data cut off mid-JSON;
- ``search:N``: the answer reports N server-side web searches (Anthropic
  ``usage.server_tool_use``, OpenAI Responses ``web_search_call`` output items);
- ``gzip``: a JSON answer compressed with gzip; ``bad-usage``: an Anthropic
  answer whose usage has a negative count;
- ``cookie``: a JSON answer that sets a cookie (as providers behind a CDN do);
- ``bill``: an Anthropic or Gemini JSON answer whose usage is what the provider
  would bill for the request, by ``tests.fakes.billing`` (output at its limit);
- ``array:NAME``: a Gemini JSON-array stream that waits before each element
  after the first (and before its closing bracket) until the test releases it.

Two headers shape an answer beside the scenario: ``x-test-response-id`` is the
id it answers with (``chatcmpl-<id>``, ``msg_<id>``, ``resp_<id>``, Gemini's
``responseId``), so calls can share one, as OpenAI-compatible servers such as
Ollama reuse theirs; ``x-test-usage`` is a JSON usage object it reports instead
of its own (audio and image token details, say).

``GET /_control/requests`` lists every request that reached it (path, query,
headers, body); ``/_control/*`` is never forwarded by the gateway.
``POST /_control/refuse`` makes every later model call a 402 in the provider's
shape (as the gateway refuses a halt), to see what a client does with one.

In agent mode (``--agent``) it answers every model call as the scripted agent
of ``tests.fakes.agent_mode`` (a tool call per turn, for as many turns as the
client goes on), and ``GET /_control/calls`` lists each answer with its usage.
"""

import gzip
import itertools
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.fakes import agent_mode, billing
from tests.fakes.answers import (
    DETAILED_USAGE,
    OVERLOADED,
    ROUND_USAGE,
    anthropic_events,
    anthropic_message,
    budget_error,
    chat_chunks,
    chat_completion,
    full_response_events,
    gemini_chunks,
    gemini_response,
    response_document,
    response_events,
    spoil_usage_event,
    sse,
    status_error,
)

MODEL_PATHS = ("/messages", "/chat/completions", "/responses")


class Server(ThreadingHTTPServer):
    """The HTTP server and what one fake provider keeps: requests, scenarios, modes."""

    request_queue_size = 1024  # the default 5 drops connections of a busy benchmark
    daemon_threads = True

    def __init__(self, *, agent: bool = False, detailed_usage: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.agent = agent
        self.refusing = False
        self.usage = DETAILED_USAGE if detailed_usage else ROUND_USAGE
        # With detailed usage, Responses streams carry every event the SDKs' helpers read.
        self.full_events = detailed_usage
        self.requests: list[dict[str, Any]] = []
        self.scenarios: list[str] = []
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        self._gates: dict[str, threading.Semaphore] = {}

    def gate(self, name: str) -> threading.Semaphore:
        """The semaphore a ``pause:NAME`` stream waits on before each later event."""
        with self.lock:
            return self._gates.setdefault(name, threading.Semaphore(0))

    def open_gates(self) -> None:
        """Let every paused stream run to its end (the fake is closing)."""
        with self.lock:
            gates = list(self._gates.values())
        for gate in gates:
            gate.release(10_000)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes: without TCP_NODELAY, Nagle's
    # algorithm and the client's delayed ACK add ~40 ms to every reply.
    disable_nagle_algorithm = True
    server: Server
    scenario = ""

    def log_message(self, *_args: Any) -> None:
        return

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/_control/requests":
            self._json(200, {"requests": list(self.server.requests)})
            return
        if path == "/_control/calls":
            self._json(200, {"calls": list(agent_mode.calls)})
            return
        self._note(b"")
        if path == "/v1/models":
            self._json(200, {"data": [{"id": "claude-test", "type": "model"}], "object": "list",
                             "has_more": False})  # fmt: skip
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
            self.server.refusing = True
            self._json(200, {"refusing": True})
            return
        if parts.path.startswith("/_control/release/"):
            self.server.gate(parts.path.rsplit("/", 1)[1]).release()
            self._json(200, {"released": True})
            return
        self._note(body)
        request = json.loads(body or b"{}")
        model = request.get("model", "m")
        with self.server.lock:
            queued = self.server.scenarios.pop(0) if self.server.scenarios else ""
            number = next(self.server.ids)
        self.scenario = self.headers.get("x-test-scenario", "") or queued
        if self.scenario == "hold":
            self.scenario = "pause:hold"
        if self.server.refusing and parts.path != "/v1/messages/count_tokens":
            self._json(402, budget_error(parts.path))
            return
        if self.server.agent and self._agent_answer(parts.path, request):
            return
        fixed_id = self.headers.get("x-test-response-id")
        suffix = fixed_id or f"{number:06d}"
        if self.scenario.startswith("status:"):
            status = int(self.scenario.split(":", 1)[1])
            self._json(status, status_error(parts.path, status))
        elif parts.path.startswith("/v1beta/models/"):
            self._gemini(parts.path, parts.query, suffix, request)
        elif parts.path == "/v1/messages/count_tokens":
            self._json(200, {"input_tokens": 12})
        elif parts.path == "/v1/messages":
            stream = request.get("stream") is True
            self._anthropic(model, f"msg_{suffix}", stream=stream, request=request)
        elif parts.path.endswith("/chat/completions"):
            # /v1/chat/completions, or an OpenAI-compatible base URL's own
            # (Google's /v1beta/openai/chat/completions).
            completion_id = f"chatcmpl-{suffix}"
            usage = self._usage("chat")
            if request.get("stream"):
                with_usage = bool((request.get("stream_options") or {}).get("include_usage"))
                found = chat_chunks(model, completion_id, with_usage=with_usage, usage=usage)
                chunks = [f"data: {json.dumps(c)}\n\n" for c in found]
                self._sse([*chunks, "data: [DONE]\n\n"])
            else:
                self._json(200, chat_completion(model, completion_id, usage))
        elif parts.path == "/v1/responses":
            self._responses(model, f"resp_{suffix}", stream=request.get("stream") is True)
        else:
            self._json(404, {"error": {"type": "not_found", "message": parts.path}})

    def _usage(self, kind: str) -> dict[str, Any]:
        """The usage to report: the test's own (``x-test-usage``), else the profile's."""
        given = self.headers.get("x-test-usage")
        if given:
            found: dict[str, Any] = json.loads(given)
            return found
        return dict(self.server.usage[kind])

    def _anthropic(
        self, model: str, message_id: str, *, stream: bool, request: dict[str, Any]
    ) -> None:
        usage = self._usage("anthropic")
        if self.scenario == "bill":
            usage = billing.anthropic_usage(request)
        elif self.scenario.startswith("search:"):
            searches = {"web_search_requests": int(self.scenario.split(":", 1)[1])}
            usage = {**usage, "server_tool_use": searches}
        elif self.scenario == "bad-usage":
            usage = {"input_tokens": -1}
        if stream and not self.scenario.startswith("search:"):
            self._sse(sse(anthropic_events(model, message_id, usage)))
        else:
            self._json(200, anthropic_message(model, message_id, usage))

    def _responses(self, model: str, response_id: str, *, stream: bool) -> None:
        usage = self._usage("responses")
        document = response_document(model, response_id, usage)
        if self.scenario.startswith("search:"):
            calls = [{"type": "web_search_call", "id": f"ws_{index}", "status": "completed"}
                     for index in range(int(self.scenario.split(":", 1)[1]))]  # fmt: skip
            document = {**document, "output": [*calls, *document["output"]]}
        if not stream or self.scenario.startswith("search:"):
            self._json(200, document)
        elif self.server.full_events:
            self._sse(sse(full_response_events(model, response_id, usage)))
        else:
            self._sse(sse(response_events(model, response_id, usage)))

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

    def _gemini(self, path: str, query: str, suffix: str, request: dict[str, Any]) -> None:
        model, _, method = path.removeprefix("/v1beta/models/").partition(":")
        response_id = f"gemini{suffix}"
        usage = self._usage("gemini")
        if method == "countTokens":
            self._json(200, {"totalTokens": 12})
        elif method == "generateContent":
            answer = gemini_response(model, response_id, usage)
            if self.scenario == "bill":
                answer["usageMetadata"] = billing.gemini_usage(request)
            self._json(200, answer)
        elif method == "streamGenerateContent" and self.scenario.startswith("array:"):
            self._array(gemini_chunks(model, response_id, usage), self.scenario.split(":", 1)[1])
        elif method == "streamGenerateContent" and "alt=sse" in query:
            chunks = gemini_chunks(model, response_id, usage)
            self._sse([f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in chunks])
        elif method == "streamGenerateContent":
            self._json(200, gemini_chunks(model, response_id, usage))
        else:
            self._json(404, {"error": {"code": 404, "message": path, "status": "NOT_FOUND"}})

    def _note(self, body: bytes) -> None:
        parts = urlsplit(self.path)
        self.server.requests.append(
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
        if self.scenario == "gzip":
            data = gzip.compress(data)
            self.send_header("Content-Encoding", "gzip")
        if self.scenario == "cookie":
            self.send_header("Set-Cookie", "__cf_bm=one-callers; Path=/; HttpOnly")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.scenario == "cut":
            # The whole length promised, half of it sent, the connection dropped.
            self.wfile.write(data[: len(data) // 2])
            self._drop()
            return
        self.wfile.write(data)

    def _sse(self, events: list[str]) -> None:
        scenario = self.scenario
        events = spoil_usage_event(urlsplit(self.path).path, events, scenario)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        if scenario == "cut":
            # The whole stream's length promised, so the drop is an error and not its end.
            self.send_header("Content-Length", str(len("".join(events).encode())))
        self.end_headers()
        self.close_connection = True
        if scenario.startswith("whole:"):
            self.server.gate(scenario.split(":", 1)[1]).acquire()
            self.wfile.write("".join(events).encode())
            self.wfile.flush()
            return
        for index, event in enumerate(events):
            if index and scenario.startswith("pause:"):
                self.server.gate(scenario.split(":", 1)[1]).acquire()
            self.wfile.write(event.encode())
            self.wfile.flush()
            if index == 0 and scenario == "error":
                self.wfile.write(f"event: error\ndata: {json.dumps(OVERLOADED)}\n\n".encode())
                self.wfile.flush()
                return
            if index == 0 and scenario == "cut":
                self._drop()
                return

    def _array(self, elements: list[dict[str, Any]], gate: str) -> None:
        """A JSON-array stream, element by element, each after the first once released."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        pieces = [f"[{json.dumps(elements[0])}"]
        pieces += [f",\r\n{json.dumps(element)}" for element in elements[1:]]
        for index, piece in enumerate([*pieces, "]"]):
            if index:
                self.server.gate(gate).acquire()
            self.wfile.write(piece.encode())
            self.wfile.flush()

    def _drop(self) -> None:
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True


class FakeProvider:
    """The fake provider serving in a thread of the test, at ``url``, until ``close``.

    ``detailed_usage`` answers with usage objects that carry cache and reasoning
    tokens (and Responses streams with every event); ``scenarios`` queues the
    scenario of each next model call; ``clients`` are SDK clients to close with it.
    """

    def __init__(self, *, detailed_usage: bool = False) -> None:
        self.server = Server(detailed_usage=detailed_usage)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.clients: list[Any] = []
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def scenarios(self) -> list[str]:
        """The scenarios of the next model calls, in order (then ordinary answers)."""
        return self.server.scenarios

    @scenarios.setter
    def scenarios(self, queued: list[str]) -> None:
        with self.server.lock:
            self.server.scenarios = list(queued)

    @property
    def requests(self) -> list[tuple[str, dict[str, Any]]]:
        """Every request that reached it: its path (with the query) and its JSON body."""
        return [
            (note["path"] + (f"?{note['query']}" if note["query"] else ""),
             json.loads(note["body"]) if note["body"] else {})
            for note in self.server.requests
        ]  # fmt: skip

    def model_requests(self) -> list[tuple[str, dict[str, Any]]]:
        """The requests that reached a model endpoint."""
        return [(path, body) for path, body in self.requests
                if path.split("?")[0].endswith(MODEL_PATHS)]  # fmt: skip

    def close(self) -> None:
        self.server.open_gates()
        self.server.shutdown()
        self.server.server_close()


def main() -> None:
    server = Server(agent="--agent" in sys.argv[1:])
    sys.stdout.write(f"{server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
