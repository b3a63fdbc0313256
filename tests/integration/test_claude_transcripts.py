"""Claude Code transcripts as Claude Code writes them: late usage, sidechains, subagents.

Real ``ledger`` processes read transcript files built line by line.
"""

import json
import shutil

import pytest

from tests.gate_helpers import events_of
from tests.integration.claude_helpers import (
    PRICES,
    SESSION,
    answer,
    append,
    assistant,
    output_micros,
    run_hook,
    tool_result,
)
from tests.integration.test_agent_helpers import assert_chain_verifies


@pytest.fixture
def priced(home):
    path = home / "ledger.toml"
    path.write_text(path.read_text() + PRICES)
    return home


@pytest.fixture
def transcript(tmp_path):
    path = tmp_path / "projects" / f"{SESSION}.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"")
    return path


def records(home):
    return [
        (p["idempotency_key"], p["tokens"]["output"], p["actual_micros"])
        for p in (e["payload"] for e in events_of(home, "budget.record_call"))
    ]


def test_usage_that_grows_after_another_line_is_topped_up(priced, transcript, run_inproc):
    # The response's first block is written with a partial usage, then its tool
    # runs; its fuller lines come only after the tool result.
    append(transcript, assistant("msg_01A", 10, block=0), tool_result("toolu_1"))
    answer(run_hook(priced, "post-tool-use", transcript))
    assert records(priced) == [("anthropic:msg_01A", 10, output_micros(10))]
    append(transcript, assistant("msg_01A", 100_010, block=1), tool_result("toolu_2"))
    answer(run_hook(priced, "post-tool-use", transcript))
    append(transcript, assistant("msg_01A", 150_010, block=2))
    answer(run_hook(priced, "stop", transcript))
    expected = [
        ("anthropic:msg_01A", 10, output_micros(10)),
        ("anthropic:msg_01A:1", 100_000, output_micros(100_000)),
        ("anthropic:msg_01A:2", 50_000, output_micros(50_000)),
    ]
    assert records(priced) == expected
    # Whatever is read again — the same lines, or all of it with the cursors lost —
    # the records of the message still add up to its fullest usage.
    answer(run_hook(priced, "stop", transcript))
    shutil.rmtree(priced / "state" / "transcripts")
    answer(run_hook(priced, "stop", transcript))
    assert records(priced) == expected
    assert sum(micros for _, _, micros in records(priced)) == output_micros(150_010)
    assert_chain_verifies(run_inproc, priced)


def test_a_whole_message_read_at_once_is_recorded_once(priced, transcript):
    append(
        transcript,
        assistant("msg_01A", 10, block=0),
        tool_result("toolu_1"),
        assistant("msg_01A", 100_010, block=1),
        tool_result("toolu_2"),
    )
    answer(run_hook(priced, "post-tool-use", transcript))
    assert records(priced) == [("anthropic:msg_01A", 100_010, output_micros(100_010))]


def test_sidechain_lines_and_subagent_transcripts_are_recorded(priced, transcript):
    append(
        transcript,
        assistant("msg_01M", 1_000),
        tool_result("toolu_task"),
        assistant("msg_01S", 500, sidechain=True),
        tool_result("toolu_side", sidechain=True),
    )
    subagents = transcript.parent / SESSION / "subagents"
    subagents.mkdir(parents=True)
    first, second = subagents / "agent-a1.jsonl", subagents / "agent-b2.jsonl"
    append(
        first,
        assistant("msg_01X", 2_000, sidechain=True, block=0),
        tool_result("toolu_x", sidechain=True),
        assistant("msg_01X", 2_500, sidechain=True, block=1),
    )
    append(second, assistant("msg_01Y", 3_000, sidechain=True))
    (subagents / "notes.txt").write_text("not a transcript")
    answer(run_hook(priced, "post-tool-use", transcript))
    # Each file's newest call may still grow: PostToolUse leaves it for later.
    assert records(priced) == [("anthropic:msg_01M", 1_000, output_micros(1_000)),
                               ("anthropic:msg_01S", 500, output_micros(500))]  # fmt: skip
    answer(run_hook(priced, "stop", transcript))
    assert records(priced)[2:] == [
        ("anthropic:msg_01X", 2_500, output_micros(2_500)),
        ("anthropic:msg_01Y", 3_000, output_micros(3_000)),
    ]
    assert {p["payload"]["cycle_id"] for p in events_of(priced, "budget.record_call")} == {SESSION}
    # The session's estimate counts its subagents' calls: four calls, $0.105 in all.
    answer(run_hook(priced, "pre-tool-use", transcript, {"LEDGER_USD_DAILY_CAP": "10"}))
    [verdict] = events_of(priced, "budget.allow")
    assert verdict["payload"]["estimated_micros"] == -(-output_micros(7_000) // 4)


def test_a_huge_line_still_being_written_is_not_read_again(priced, transcript):
    # A tool result of 33 MiB (longer than any line is held) is being written.
    append(transcript, assistant("msg_01A", 1_000), tool_result("toolu_1"))
    head = b'{"type": "user", "message": {"role": "user", "content": "' + b"x" * (33 << 20)
    with transcript.open("ab") as handle:
        handle.write(head)
    answer(run_hook(priced, "post-tool-use", transcript))
    [cursor_file] = (priced / "state" / "transcripts").glob("*.json")
    cursor = json.loads(cursor_file.read_text())
    # The next read goes on from the end of what was read, not from the line's start.
    size = transcript.stat().st_size
    assert cursor["partial"] == {"start": cursor["offset"], "scanned": size}
    with transcript.open("ab") as handle:
        handle.write(b'"}}\n')
    append(transcript, assistant("msg_01B", 2_000), tool_result("toolu_2"))
    proc = run_hook(priced, "post-tool-use", transcript)
    answer(proc)
    assert f"byte {cursor['offset']}: line too long to read" in proc.stderr
    assert records(priced) == [
        ("anthropic:msg_01A", 1_000, output_micros(1_000)),
        ("anthropic:msg_01B", 2_000, output_micros(2_000)),
    ]
