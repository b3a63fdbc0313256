"""Claude Code transcripts and hook inputs built line by line, as Claude Code writes them.

An API response is written as one assistant line per content block, each with
the response's ``message.id`` and ``requestId``; its ``usage`` grows as the
response streams, so an early line may hold a partial usage. Tool results are
user lines; subagents (the Task tool) write sidechain lines to
``<session>/subagents/agent-*.jsonl`` beside the session's transcript.
"""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.integration.test_agent_helpers import process_env

REPO = Path(__file__).resolve().parents[2]
HOOKS = REPO / "tests" / "fixtures" / "hooks"
SESSION = "8c3f2a51-6f0e-4d7b-9a61-2b9f4d1e7c30"
NOW = "2026-11-22T08:00:00Z"
# Stale billing never halts here: these tests are about the cap itself.
ENV = {"LEDGER_NOW": NOW, "LEDGER_BILLING_STALE_HALT_PCT": "100"}
PRICES = """
[prices."anthropic/test-sonnet"]
input_per_mtok = 3
output_per_mtok = 15
"""
EVENTS = {
    "pre-tool-use": "PreToolUse",
    "post-tool-use": "PostToolUse",
    "stop": "Stop",
    "user-prompt-submit": "UserPromptSubmit",
    "session-end": "SessionEnd",
}
FIXTURE = {
    "PreToolUse": "pre_tool_use_bash.json",
    "PostToolUse": "post_tool_use_bash.json",
    "Stop": "stop.json",
    "UserPromptSubmit": "user_prompt_submit.json",
    "SessionEnd": "session_end.json",
}


def output_micros(tokens: int) -> int:
    """The price of ``tokens`` output tokens of test-sonnet ($15 per million)."""
    return tokens * 15


def assistant(
    message_id: str, output_tokens: int, *, block: int = 0, sidechain: bool = False,
    session: str = SESSION, input_tokens: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """One assistant line: one content block of response ``message_id`` with its usage so far."""
    return {
        "parentUuid": None, "isSidechain": sidechain, "userType": "external",
        "cwd": "/home/dev/repo", "sessionId": session, "version": "2.0.14", "type": "assistant",
        "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": "test-sonnet",
            "content": [{"type": "text", "text": f"block {block}"}],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": output_tokens,
                      "service_tier": "standard"},
        },
        "requestId": f"req_{message_id}",
        "uuid": f"{message_id}-{block}", "timestamp": "2026-11-22T07:59:00.000Z",
    }  # fmt: skip


def tool_result(tool_use_id: str = "toolu_01", *, sidechain: bool = False) -> dict[str, Any]:
    """A user line carrying a tool's result (not a call)."""
    return {
        "parentUuid": None, "isSidechain": sidechain, "type": "user", "sessionId": SESSION,
        "message": {"role": "user", "content": [
            {"tool_use_id": tool_use_id, "type": "tool_result", "content": "ok"}]},
        "uuid": f"result-{tool_use_id}", "timestamp": "2026-11-22T07:59:01.000Z",
    }  # fmt: skip


def jsonl(*documents: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(d).encode() + b"\n" for d in documents)


def append(path: Path, *documents: dict[str, Any]) -> None:
    with path.open("ab") as handle:
        handle.write(jsonl(*documents))


def hook_input(event: str, transcript: Path | None) -> str:
    document = json.loads((HOOKS / FIXTURE[event]).read_text())
    document["transcript_path"] = None if transcript is None else str(transcript)
    return json.dumps(document)


def run_hook(
    home: Path, command: str, transcript: Path | None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``ledger --home HOME hook COMMAND`` as a real process, fed the event's real hook JSON."""
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), "hook", command],
        input=hook_input(EVENTS[command], transcript), capture_output=True, text=True,
        env=process_env(**(ENV | (env or {}))), timeout=120, check=False,
    )  # fmt: skip


def answer(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The hook's JSON answer; a hook always exits 0 with one JSON object."""
    assert proc.returncode == 0, proc.stderr
    document: dict[str, Any] = json.loads(proc.stdout)
    return document
