"""A Claude Code session whose USD budget halts stops, and hooks fail closed.

Real ``ledger`` processes, fed the hook JSON Claude Code sends, over transcript
files built line by line as Claude Code writes them.
"""

import pytest

from tests.gate_helpers import events_of
from tests.integration.claude_helpers import (
    ENV,
    PRICES,
    SESSION,
    answer,
    append,
    assistant,
    output_micros,
    run_hook,
    tool_result,
)
from tests.integration.test_agent_helpers import assert_chain_verifies, cli

# A turn of two responses: one that calls a tool ($2.210010), then a short answer
# ($0.015); together they take the day exactly to its cap.
TOOL_TURN_TOKENS = 147_334
ANSWER_TOKENS = 1_000
CAP = {"LEDGER_USD_DAILY_CAP": "2.22501"}
LIFTED = "spend resumes when the next budget day begins (2026-11-23 00:00 UTC)"


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


def spent(home):
    return [
        p["actual_micros"] for p in (e["payload"] for e in events_of(home, "budget.record_call"))
    ]


def test_after_the_cap_closes_text_only_turns_are_blocked(priced, transcript, run_inproc):
    # The first prompt and tool call of the day are admitted.
    assert answer(run_hook(priced, "user-prompt-submit", transcript, CAP)) == {}
    append(
        transcript,
        assistant("msg_01A", 12, block=0),
        assistant("msg_01A", TOOL_TURN_TOKENS, block=1),
    )
    assert answer(run_hook(priced, "pre-tool-use", transcript, CAP)) == {}
    append(transcript, tool_result())
    assert "continue" not in answer(run_hook(priced, "post-tool-use", transcript, CAP))
    # The turn's text-only answer closes the cap; the Stop hook says so.
    append(transcript, assistant("msg_01B", ANSWER_TOKENS))
    stopped = answer(run_hook(priced, "stop", transcript, CAP))
    assert spent(priced) == [output_micros(TOOL_TURN_TOKENS), output_micros(ANSWER_TOKENS)]
    assert stopped["continue"] is False
    assert stopped["stopReason"].startswith("ledger: USD budget halt-100 for 2026-11-22: ")
    assert stopped["stopReason"].endswith(LIFTED)
    # Every new prompt is blocked before it reaches the model: no text-only turn spends.
    for _ in range(3):
        blocked = answer(run_hook(priced, "user-prompt-submit", transcript, CAP))
        assert blocked["decision"] == "block"
        assert blocked["reason"].startswith("ledger: USD budget halt-100 for 2026-11-22: ")
        assert "prompt blocked" in blocked["reason"]
        assert blocked["reason"].endswith(LIFTED)
    # A tool call stops the session; no denial beside it (some releases loop on one).
    denied = answer(run_hook(priced, "pre-tool-use", transcript, CAP))
    assert "hookSpecificOutput" not in denied
    assert denied["continue"] is False
    assert denied["stopReason"] == denied["systemMessage"]
    assert denied["stopReason"].endswith(LIFTED)
    assert len(events_of(priced, "budget.halt_100")) == 4
    assert len(spent(priced)) == 2
    assert_chain_verifies(run_inproc, priced)


def test_post_tool_use_stops_the_session_once_the_cap_is_reached(priced, transcript):
    assert answer(run_hook(priced, "user-prompt-submit", transcript, CAP)) == {}
    append(transcript, assistant("msg_01A", TOOL_TURN_TOKENS + ANSWER_TOKENS), tool_result())
    after_tool = answer(run_hook(priced, "post-tool-use", transcript, CAP))
    assert after_tool["continue"] is False
    assert after_tool["stopReason"].startswith("ledger: USD budget halt-100 for 2026-11-22: ")
    assert "session stopped" in after_tool["stopReason"]
    assert "next call" not in after_tool["stopReason"]  # nothing more was asked for
    assert after_tool["stopReason"].endswith(LIFTED)


def test_the_halt_is_said_in_the_budget_days_zone(priced, transcript):
    append(transcript, assistant("msg_01A", TOOL_TURN_TOKENS + ANSWER_TOKENS), tool_result())
    # 12:00 UTC on the 22nd is 01:00 on the 23rd in Auckland: that budget day ends
    # at its midnight there.
    env = {
        **CAP,
        "LEDGER_USD_DAY_TIMEZONE": "Pacific/Auckland",
        "LEDGER_NOW": "2026-11-22T12:00:00Z",
    }
    answer(run_hook(priced, "post-tool-use", transcript, env))
    blocked = answer(run_hook(priced, "user-prompt-submit", transcript, env))
    assert blocked["reason"].startswith("ledger: USD budget halt-100 for 2026-11-23: ")
    assert blocked["reason"].endswith(
        "spend resumes when the next budget day begins (2026-11-24 00:00 Pacific/Auckland)"
    )


def test_a_prompt_under_the_cap_is_admitted_and_warned_near_it(priced, transcript):
    append(transcript, assistant("msg_01A", 120_000), tool_result())  # $1.80
    answer(run_hook(priced, "post-tool-use", transcript, {"LEDGER_USD_DAILY_CAP": "10"}))
    admitted = run_hook(priced, "user-prompt-submit", transcript, {"LEDGER_USD_DAILY_CAP": "10"})
    assert answer(admitted) == {}
    # used $1.80, reserved $1.80 (the admitted prompt), estimate $1.80: 93.1 % of $5.80
    warned = run_hook(priced, "user-prompt-submit", transcript, {"LEDGER_USD_DAILY_CAP": "5.8"})
    assert answer(warned)["systemMessage"].startswith("ledger: USD budget warn-90: ")
    assert "(93.1% projected)" in answer(warned)["systemMessage"]
    assert "decision" not in answer(warned)


def test_an_uncertainty_halt_names_the_operator_command(priced, transcript):
    append(transcript, assistant("msg_01A", 1_000), tool_result())
    with (priced / "events.jsonl").open("ab") as chain:
        chain.write(b'{"schema_version": "1.1.0", "prim')  # a torn last line
    stopped = answer(run_hook(priced, "post-tool-use", transcript, CAP))
    # The spend cannot be recorded on a torn chain: the session stops.
    assert stopped["continue"] is False
    assert stopped["stopReason"].startswith("ledger: this session's spend could not be recorded")
    assert str(priced.absolute()) in stopped["stopReason"]
    blocked = answer(run_hook(priced, "user-prompt-submit", transcript, CAP))
    assert blocked["decision"] == "block"
    reason = blocked["reason"]
    assert reason.startswith("ledger: USD budget halt-uncertainty (counter_inconsistent): ")
    assert "`ledger recover`" in reason
    assert "budget day" not in reason
    denied = answer(run_hook(priced, "pre-tool-use", transcript, CAP))
    assert denied["continue"] is False
    assert "`ledger recover`" in denied["stopReason"]


def test_without_a_cap_prompts_are_never_blocked(tmp_path, transcript, run_inproc):
    home = tmp_path / "no-cap"
    assert cli(run_inproc, home, "init").code == 0
    first = answer(run_hook(home, "user-prompt-submit", transcript))
    assert first["systemMessage"].startswith("ledger: USD gating is off: no usd.daily_cap")
    assert answer(run_hook(home, "user-prompt-submit", transcript)) == {}


@pytest.mark.parametrize("kind", ["missing", "empty folder", "a file", "unreadable config"])
def test_a_home_that_cannot_be_used_refuses_and_creates_nothing(tmp_path, transcript, kind):
    home = tmp_path / "ledger-hmoe"  # mistyped in settings.json
    if kind == "empty folder":
        home.mkdir()
    elif kind == "a file":
        home.write_text("")
    elif kind == "unreadable config":
        (home / "ledger.toml").mkdir(parents=True)  # read as root too: a folder is no file
    append(transcript, assistant("msg_01A", 1_000), tool_result())
    before = sorted(tmp_path.iterdir())
    pre = answer(run_hook(home, "pre-tool-use", transcript))["hookSpecificOutput"]
    assert pre["permissionDecision"] == "deny"
    assert str(home) in pre["permissionDecisionReason"]
    assert pre["permissionDecisionReason"].endswith("; tool call refused (fail-closed)")
    prompt = answer(run_hook(home, "user-prompt-submit", transcript))
    assert prompt["decision"] == "block"
    assert str(home) in prompt["reason"]
    for command in ("post-tool-use", "stop"):
        proc = run_hook(home, command, transcript)
        stopped = answer(proc)
        assert stopped["continue"] is False
        assert str(home) in stopped["stopReason"]
        assert proc.stderr.count("\n") == 1
        assert proc.stderr.startswith("ledger: ")
    assert sorted(tmp_path.iterdir()) == before
    if kind == "empty folder":
        assert list(home.iterdir()) == []


def reserved(home, run_inproc):
    status = cli(run_inproc, home, "status", "--json", env=ENV | CAP).json()
    micros: int = status["usd"]["caps"][0]["usd_reserved_micros"]
    return micros


def test_session_end_records_the_newest_response_and_releases_the_reservation(
    priced, transcript, run_inproc
):
    append(transcript, assistant("msg_01A", 12, block=0), assistant("msg_01A", 1_000, block=1))
    assert answer(run_hook(priced, "pre-tool-use", transcript, CAP)) == {}
    append(transcript, tool_result(), assistant("msg_01B", 2_000))
    # post-tool-use leaves the newest response (it may still grow) for later.
    answer(run_hook(priced, "post-tool-use", transcript, CAP))
    assert spent(priced) == [output_micros(1_000)]

    assert answer(run_hook(priced, "session-end", transcript, CAP)) == {}
    assert spent(priced) == [output_micros(1_000), output_micros(2_000)]
    # A prompt's reservation that no call settles is released when the session ends.
    assert answer(run_hook(priced, "user-prompt-submit", transcript, CAP)) == {}
    assert reserved(priced, run_inproc) > 0

    assert answer(run_hook(priced, "session-end", transcript, CAP)) == {}

    assert spent(priced) == [output_micros(1_000), output_micros(2_000), 0]
    assert reserved(priced, run_inproc) == 0
    # Run again (a retry), it records and releases nothing more.
    assert answer(run_hook(priced, "session-end", transcript, CAP)) == {}
    assert len(spent(priced)) == 3
    assert_chain_verifies(run_inproc, priced)


def test_behind_a_gateway_the_hooks_reserve_nothing_and_still_stop_a_halted_session(
    priced, transcript, run_inproc
):
    gateway = {**CAP, "LEDGER_GATEWAY_URL": "http://127.0.0.1:8787"}

    def gateway_records(message_id: str, tokens: int) -> None:
        # What the gateway seals for the response, under the response's own key.
        usage = f'{{"input_tokens": 0, "output_tokens": {tokens}}}'
        done = cli(run_inproc, priced, "record", "--provider", "anthropic", "--model",
                   "test-sonnet", "--usage-json", usage, "--idempotency-key",
                   f"anthropic:{message_id}", "--cycle-id", SESSION, env=ENV | CAP)  # fmt: skip
        assert done.code == 0, done.stderr

    assert answer(run_hook(priced, "user-prompt-submit", transcript, gateway)) == {}
    gateway_records("msg_01A", TOOL_TURN_TOKENS)
    append(transcript, assistant("msg_01A", TOOL_TURN_TOKENS))
    assert answer(run_hook(priced, "pre-tool-use", transcript, gateway)) == {}
    assert events_of(priced, "budget.allow") == []
    assert reserved(priced, run_inproc) == 0
    append(transcript, tool_result())
    assert "continue" not in answer(run_hook(priced, "post-tool-use", transcript, gateway))
    gateway_records("msg_01B", ANSWER_TOKENS)
    append(transcript, assistant("msg_01B", ANSWER_TOKENS))

    stopped = answer(run_hook(priced, "pre-tool-use", transcript, gateway))

    assert stopped["continue"] is False
    assert stopped["stopReason"].startswith("ledger: USD budget halt-100 for 2026-11-22: ")
    # The transcript, read whole on the stop, counted no response a second time.
    assert spent(priced) == [output_micros(TOOL_TURN_TOKENS), output_micros(ANSWER_TOKENS)]
