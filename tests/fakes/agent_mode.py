"""The fake provider's scripted agent mode: every model call asks for one more tool call.

A real agent CLI (Claude Code, Codex CLI, Gemini CLI) pointed at the fake in
this mode loops for as many turns as a budget lets it: each answer calls the
CLI's own shell tool (a harmless ``echo``) with the usage of a realistic
agent turn (about 20k input and 1-2k output tokens). Requests that offer no
shell tool (title or classifier requests) get a short text answer at their
own small usage. Every answer is logged with its usage and response id
(``calls``), which is the provider's own truth a test compares with the chain.
"""

import itertools
import json
import threading
from typing import Any

INPUT_TOKENS = 20_000
_ids = itertools.count(1)
_lock = threading.Lock()
calls: list[dict[str, Any]] = []

# The shell tools the CLIs offer, and the arguments that run a harmless command
# with each; the command names its step, as clients stop a loop of identical calls.
_SHELL_TOOLS: dict[str, Any] = {
    "Bash": lambda step: {"command": f"echo step {step}", "description": "Check the workspace"},
    "shell": lambda step: {"command": ["echo", f"step {step}"]},
    "shell_command": lambda step: {"command": f"echo step {step}"},
    "exec_command": lambda step: {"cmd": f"echo step {step}"},
    "local_shell": lambda step: {"command": ["echo", f"step {step}"]},
    "run_shell_command": lambda step: {
        "command": f"echo step {step}",
        "description": "Check the workspace",
    },
}


def _turn_usage(number: int, request: dict[str, Any]) -> tuple[int, int]:
    """Input and output tokens of call ``number``: 1,000-1,999 out, varying, and in at least
    20k, or about what the request holds (4 bytes a token, as the provider counts text
    and JSON), as a client with a large system prompt and many tools pays for it."""
    size = len(json.dumps(request, ensure_ascii=False).encode()) // 4
    return max(INPUT_TOKENS, size) + (number * 7919) % 2000, 1000 + (number * 389) % 1000


def _log(path: str, model: str, response_id: str, usage: dict[str, Any], stream: bool) -> None:
    with _lock:
        calls.append(
            {"path": path, "model": model, "id": response_id, "usage": usage, "stream": stream}
        )


def _tool_names(request: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in request.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        names.append(str(tool.get("name") or tool.get("type") or ""))
        for declaration in (
            tool.get("functionDeclarations") or tool.get("function_declarations") or []
        ):
            names.append(str(declaration.get("name", "")))
        function = tool.get("function")
        if isinstance(function, dict):
            names.append(str(function.get("name", "")))
    return names


def shell_tool(request: dict[str, Any]) -> str | None:
    """The name of the shell tool the request offers, if any."""
    offered = _tool_names(request)
    return next((name for name in _SHELL_TOOLS if name in offered), None)


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> list[str]:
    return [
        (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
        for name, data in events
    ]


def anthropic(path: str, request: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """A Messages API answer: (the JSON document, or None) and the SSE events when streaming."""
    number = next(_ids)
    model = str(request.get("model", "m"))
    message_id = f"msg_agent{number:06d}"
    tool = shell_tool(request)
    input_tokens, output_tokens = _turn_usage(number, request) if tool else (300, 20)
    usage = {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0, "output_tokens": output_tokens}  # fmt: skip
    stream = bool(request.get("stream"))
    _log(path, model, message_id, usage, stream)
    if tool:
        arguments = _SHELL_TOOLS[tool](number)
        block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{number:06d}", "name": tool,
                                 "input": arguments}  # fmt: skip
        stop_reason = "tool_use"
    else:
        block = {"type": "text", "text": "Workspace check"}
        stop_reason = "end_turn"
    document = {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": [block], "stop_reason": stop_reason, "stop_sequence": None, "usage": usage,
    }  # fmt: skip
    if not stream:
        return document, []
    started = {**document, "content": [], "stop_reason": None,
               "usage": {**usage, "output_tokens": 1}}  # fmt: skip
    if tool:
        opened = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        opened = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    return None, _sse([
        ("message_start", {"type": "message_start", "message": started}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": opened}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                           "usage": {"output_tokens": output_tokens}}),
        ("message_stop", {"type": "message_stop"}),
    ])  # fmt: skip


def responses(path: str, request: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """An OpenAI Responses API answer: a ``function_call`` item of the request's shell tool."""
    number = next(_ids)
    model = str(request.get("model", "m"))
    response_id = f"resp_agent{number:06d}"
    tool = shell_tool(request)
    input_tokens, output_tokens = _turn_usage(number, request) if tool else (300, 20)
    usage = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": input_tokens + output_tokens}  # fmt: skip
    stream = bool(request.get("stream"))
    _log(path, model, response_id, usage, stream)
    if tool:
        item: dict[str, Any] = {"type": "function_call", "id": f"fc_{number:06d}",
                                "call_id": f"call_{number:06d}", "name": tool,
                                "arguments": json.dumps(_SHELL_TOOLS[tool](number)),
                                "status": "completed"}  # fmt: skip
    else:
        item = {"type": "message", "id": f"m_{number:06d}", "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Workspace check",
                             "annotations": []}]}  # fmt: skip
    done = {
        "id": response_id, "object": "response", "created_at": 1, "model": model,
        "status": "completed", "output": [item], "parallel_tool_calls": False,
        "tool_choice": "auto", "tools": [], "usage": usage,
    }  # fmt: skip
    if not stream:
        return done, []
    started = {**done, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": started}),
        ("response.in_progress", {"response": started}),
        (
            "response.output_item.added",
            {"output_index": 0, "item": {**item, "status": "in_progress"}},
        ),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": done}),
    ]
    numbered = [(name, {"type": name, "sequence_number": n, **data})
                for n, (name, data) in enumerate(events)]  # fmt: skip
    return None, _sse(list(numbered))


def gemini(path: str, request: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """A Gemini answer (``generateContent`` JSON, or ``streamGenerateContent`` SSE)."""
    number = next(_ids)
    model = path.rsplit("/", 1)[-1].split(":", 1)[0]
    response_id = f"gemini-agent{number:06d}"
    tool = shell_tool(request)
    input_tokens, output_tokens = _turn_usage(number, request) if tool else (300, 20)
    usage = {"promptTokenCount": input_tokens, "candidatesTokenCount": output_tokens,
             "totalTokenCount": input_tokens + output_tokens}  # fmt: skip
    stream = "streamGenerateContent" in path
    _log(path, model, response_id, usage, stream)
    if tool:
        part: dict[str, Any] = {"functionCall": {"name": tool, "args": _SHELL_TOOLS[tool](number)}}
    else:
        # What Gemini CLI's model router asks for: a JSON choice of model.
        part = {"text": json.dumps({"reasoning": "simple", "model_choice": "flash"})}
    document = {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": usage, "modelVersion": model, "responseId": response_id,
    }  # fmt: skip
    if not stream:
        return document, []
    return None, _sse([(None, document)])
