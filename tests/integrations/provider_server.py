"""A local HTTP server that answers like the Anthropic and OpenAI APIs (JSON and SSE)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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


def _anthropic_message(model: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_1", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": usage,
    }  # fmt: skip


def _anthropic_events(model: str) -> list[tuple[str, dict[str, Any]]]:
    start = {**ANTHROPIC_USAGE, "output_tokens": 1}
    message = {**_anthropic_message(model, start), "content": [], "stop_reason": None}
    return [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "hello"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 700}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip


def _chat(model: str) -> dict[str, Any]:
    return {
        "id": "c1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"},
                     "finish_reason": "stop"}],
        "usage": CHAT_USAGE,
    }  # fmt: skip


def _chat_chunks(model: str, include_usage: bool) -> list[dict[str, Any]]:
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hel"},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
    ]  # fmt: skip
    if include_usage:
        chunks.append({**base, "choices": [], "usage": CHAT_USAGE})
    return chunks


def _response(model: str) -> dict[str, Any]:
    return {
        "id": "r1", "object": "response", "created_at": 1, "model": model, "status": "completed",
        "output": [{"type": "message", "id": "m1", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": "hello", "annotations": []}]}],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": RESPONSES_USAGE,
    }  # fmt: skip


def _response_events(model: str) -> list[tuple[str, dict[str, Any]]]:
    """A Responses API stream: usage arrives only in ``response.completed``."""
    done = _response(model)
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


class ProviderServer:
    """Serves on 127.0.0.1 in a thread; ``requests`` counts what reached it."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.clients: list[Any] = []  # SDK clients to close with the server
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes: without TCP_NODELAY, Nagle's
            # algorithm and the client's delayed ACK add ~40 ms to every reply.
            disable_nagle_algorithm = True

            def log_message(self, *_args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, body))
                model = body.get("model", "m")
                if self.path.endswith("/messages"):
                    if body.get("stream"):
                        self._sse([f"event: {name}\ndata: {json.dumps(data)}\n\n"
                                   for name, data in _anthropic_events(model)])  # fmt: skip
                    else:
                        self._json(_anthropic_message(model, ANTHROPIC_USAGE))
                elif self.path.endswith("/chat/completions"):
                    if body.get("stream"):
                        include = bool((body.get("stream_options") or {}).get("include_usage"))
                        events = [
                            f"data: {json.dumps(c)}\n\n" for c in _chat_chunks(model, include)
                        ]
                        self._sse([*events, "data: [DONE]\n\n"])
                    else:
                        self._json(_chat(model))
                elif self.path.endswith("/responses"):
                    if body.get("stream"):
                        self._sse([f"event: {name}\ndata: {json.dumps(data)}\n\n"
                                   for name, data in _response_events(model)])  # fmt: skip
                    else:
                        self._json(_response(model))
                else:
                    self.send_error(404)

            def _json(self, document: dict[str, Any]) -> None:
                data = json.dumps(document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
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

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
