"""What the fake provider answers: Anthropic, OpenAI and Gemini bodies and SSE events.

Two usage profiles: round figures (``ANTHROPIC_USAGE``, …), so each call's
exact cost is easy to state in a test, and fuller objects with cache and
reasoning tokens (``DETAILED_USAGE``), as the SDKs' own types read them.
"""

import json
from typing import Any

# Small round figures, so each call's exact cost is easy to state in a test.
ANTHROPIC_USAGE = {"input_tokens": 1000, "output_tokens": 700}
CHAT_USAGE = {"prompt_tokens": 2000, "completion_tokens": 500, "total_tokens": 2500}
RESPONSES_USAGE = {"input_tokens": 3000, "output_tokens": 900, "total_tokens": 3900}
GEMINI_USAGE = {
    "promptTokenCount": 4000, "cachedContentTokenCount": 1000, "candidatesTokenCount": 300,
    "thoughtsTokenCount": 200, "totalTokenCount": 4500,
}  # fmt: skip


DETAILED_USAGE: dict[str, dict[str, Any]] = {
    "anthropic": {
        "input_tokens": 1000,
        "cache_creation_input_tokens": 3000,
        "cache_creation": {"ephemeral_5m_input_tokens": 2000, "ephemeral_1h_input_tokens": 1000},
        "cache_read_input_tokens": 5000,
        "output_tokens": 700,
    },
    "chat": {
        "prompt_tokens": 2000,
        "completion_tokens": 500,
        "total_tokens": 2500,
        "prompt_tokens_details": {"cached_tokens": 1200},
        "completion_tokens_details": {"reasoning_tokens": 200},
    },
    "responses": {
        "input_tokens": 3000,
        "input_tokens_details": {"cached_tokens": 1000},
        "output_tokens": 900,
        "output_tokens_details": {"reasoning_tokens": 600},
        "total_tokens": 3900,
    },
    "gemini": GEMINI_USAGE,
}
ROUND_USAGE: dict[str, dict[str, Any]] = {
    "anthropic": ANTHROPIC_USAGE, "chat": CHAT_USAGE, "responses": RESPONSES_USAGE,
    "gemini": GEMINI_USAGE,
}  # fmt: skip
# The error event of a stream that fails after it began.
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def budget_error(path: str) -> dict[str, Any]:
    """A 402 in the provider's error shape, as the gateway answers a halt."""
    message = "ledger: halt-100 (test refusal); the request was not sent"
    if path.startswith("/v1/messages"):
        return {"type": "error", "error": {"type": "budget_exceeded", "message": message}}
    if path.startswith("/v1beta/"):
        return {"error": {"code": 402, "message": message, "status": "RESOURCE_EXHAUSTED"}}
    return {"error": {"type": "budget_exceeded", "code": "budget_exceeded", "message": message}}


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


def response_events(
    model: str, response_id: str, usage: dict[str, Any] = RESPONSES_USAGE
) -> list[tuple[str, dict[str, Any]]]:
    done = response_document(model, response_id, usage)
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


def full_response_events(
    model: str, response_id: str, usage: dict[str, Any] = RESPONSES_USAGE
) -> list[tuple[str, dict[str, Any]]]:
    """A Responses API stream, every event of it: usage arrives only in ``response.completed``."""
    done = response_document(model, response_id, usage)
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


def status_error(path: str, status: int) -> dict[str, Any]:
    """An error answer of ``status`` in the provider's shape."""
    if path.startswith("/v1/messages"):
        return {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    if path.startswith("/v1beta/"):
        return {"error": {"code": status, "message": "busy", "status": "UNAVAILABLE"}}
    return {"error": {"type": "server_error", "code": None, "message": "busy"}}


def sse(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Named events as SSE text, one string each."""
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events]


def gemini_chunks(
    model: str, response_id: str, usage: dict[str, Any] = GEMINI_USAGE
) -> list[dict[str, Any]]:
    """A Gemini stream: usage so far on each chunk, finishReason and the whole usage on the last."""
    base = {"modelVersion": model, "responseId": response_id}
    started = {"promptTokenCount": 4000, "totalTokenCount": 4200, "thoughtsTokenCount": 200}
    return [
        {**base, "candidates": [{"content": {"parts": [{"text": "hel"}], "role": "model"},
                                 "index": 0}], "usageMetadata": started},
        {**base, "candidates": [{"content": {"parts": [{"text": "lo"}], "role": "model"},
                                 "finishReason": "STOP", "index": 0}],
         "usageMetadata": usage},
    ]  # fmt: skip


def gemini_response(
    model: str, response_id: str, usage: dict[str, Any] = GEMINI_USAGE
) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"parts": [{"text": "hello"}], "role": "model"},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage, "modelVersion": model, "responseId": response_id,
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
