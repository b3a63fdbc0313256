"""A Claude Code session at one of its ``[[budgets]]`` stops, as at a cap.

Real ``ledger`` processes, fed the hook JSON Claude Code sends, over transcript
files built line by line as Claude Code writes them. PostToolUse and Stop
(which ask for no verdict) stop the session once a budget that applies to its
next call is spent; other sessions and other agents go on.
"""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.claude_helpers import (
    ENV,
    EVENTS,
    PRICES,
    SESSION,
    append,
    assistant,
    hook_input,
    tool_result,
)
from tests.integration.test_agent_helpers import process_env

OTHER_SESSION = "0d9e1c77-2a4b-4f60-8b3e-5c1a7f2e9d04"
CAP = {"LEDGER_USD_DAILY_CAP": "100"}
DOLLAR_AND_A_HALF = 100_000  # output tokens of test-sonnet ($15 per million)
PER_SESSION = """
[[budgets]]
name = "per-session"
usd = 1
period = "day"
per = "session"
"""
BUILDERS = """
[[budgets]]
name = "builders"
usd = 1
period = "month"
per = "session"
match = { agent = "builder-*" }
"""
ROLLING = """
[[budgets]]
name = "hourly"
usd = 1
period = "rolling:2h"
per = "session"
"""


def configured(home: Path, budgets: str) -> Path:
    path = home / "ledger.toml"
    path.write_text(path.read_text() + PRICES + budgets)
    return home


def transcript_of(tmp_path: Path, session: str) -> Path:
    path = tmp_path / "projects" / f"{session}.jsonl"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"")
    return path


def hook(
    home: Path, command: str, transcript: Path, session: str = SESSION, **env: str
) -> dict[str, Any]:
    """``ledger hook COMMAND`` as a real process, fed Claude Code's hook JSON for ``session``."""
    document = json.loads(hook_input(EVENTS[command], transcript))
    document["session_id"] = session
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), "hook", command],
        input=json.dumps(document), capture_output=True, text=True,
        env=process_env(**(ENV | CAP | env)), timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def spend(transcript: Path, message_id: str, tokens: int, session: str = SESSION) -> None:
    append(transcript, assistant(message_id, tokens, session=session), tool_result())


def test_a_session_at_its_budget_stops_and_another_session_goes_on(home, tmp_path):
    configured(home, PER_SESSION)
    first = transcript_of(tmp_path, SESSION)
    spend(first, "msg_01A", DOLLAR_AND_A_HALF)  # $1.50 of the session's $1
    after_tool = hook(home, "post-tool-use", first)
    assert after_tool["continue"] is False
    reason = after_tool["stopReason"]
    assert reason.startswith("ledger: USD budget halt-100 for 2026-11-22: ")
    assert f"budget:per-session[{SESSION}] cap $1.0000, used $1.5000, reserved $0.0000" in reason
    assert "session stopped" in reason
    assert reason.endswith(
        "spend resumes when budget per-session's day ends (2026-11-23 00:00 UTC)"
    )
    stopped = hook(home, "stop", first)
    assert stopped["continue"] is False
    assert stopped["stopReason"] == reason
    # The full verdict of the next prompt says the same budget and what lifts it.
    blocked = hook(home, "user-prompt-submit", first)
    assert blocked["decision"] == "block"
    assert f"budget:per-session[{SESSION}]" in blocked["reason"]
    assert blocked["reason"].endswith(
        "spend resumes when budget per-session's day ends (2026-11-23 00:00 UTC)"
    )
    # Another session of the same day has its own budget: it goes on.
    second = transcript_of(tmp_path, OTHER_SESSION)
    spend(second, "msg_02A", 1_000, session=OTHER_SESSION)
    assert "continue" not in hook(home, "post-tool-use", second, OTHER_SESSION)
    assert hook(home, "stop", second, OTHER_SESSION) == {}
    assert hook(home, "user-prompt-submit", second, OTHER_SESSION) == {}


def test_a_budget_for_other_agents_does_not_stop_the_session(home, tmp_path):
    configured(home, BUILDERS)
    transcript = transcript_of(tmp_path, SESSION)
    # builder-1's admitted prompt is settled by the $1.50 call: the session's
    # builders budget is spent.
    assert hook(home, "user-prompt-submit", transcript, LEDGER_AGENT="builder-1") == {}
    spend(transcript, "msg_01A", DOLLAR_AND_A_HALF)
    stopped = hook(home, "post-tool-use", transcript, LEDGER_AGENT="builder-1")
    assert stopped["continue"] is False
    assert f"budget:builders[{SESSION}]" in stopped["stopReason"]
    assert stopped["stopReason"].endswith(
        "spend resumes when budget builders's month ends (2026-12-01 00:00 UTC)"
    )
    # The budget does not apply to another agent's calls, nor to calls of no agent.
    for env in ({"LEDGER_AGENT": "reviewer-1"}, {}):
        assert "continue" not in hook(home, "post-tool-use", transcript, **env)
        assert hook(home, "stop", transcript, **env) == {}


def test_a_rolling_budget_lifts_when_enough_spend_leaves_its_window(home, tmp_path):
    configured(home, ROLLING)
    transcript = transcript_of(tmp_path, SESSION)
    early = {"LEDGER_NOW": "2026-11-22T07:30:00Z"}
    spend(transcript, "msg_01A", 40_000)  # $0.60 at 07:30
    assert "continue" not in hook(home, "post-tool-use", transcript, **early)
    spend(transcript, "msg_01B", 40_000)  # $0.60 at 08:00: $1.20 of $1
    stopped = hook(home, "stop", transcript)
    assert stopped["continue"] is False
    assert f"budget:hourly[{SESSION}]" in stopped["stopReason"]
    # The $0.60 of 07:30 leaves the window at 09:30: the session is under $1 again.
    assert stopped["stopReason"].endswith(
        "spend resumes when enough spend leaves budget hourly's rolling:2h window "
        "(at 2026-11-22 09:30 UTC)"
    )
    assert hook(home, "stop", transcript, LEDGER_NOW="2026-11-22T09:30:00Z") == {}


@pytest.mark.parametrize("command", ["post-tool-use", "stop"])
def test_the_cap_still_decides_when_it_is_fuller_than_the_budget(home, tmp_path, command):
    configured(home, PER_SESSION.replace("usd = 1", "usd = 50"))
    transcript = transcript_of(tmp_path, SESSION)
    spend(transcript, "msg_01A", DOLLAR_AND_A_HALF)
    stopped = hook(home, command, transcript, LEDGER_USD_DAILY_CAP="1.5")
    assert "aggregate cap $1.5000, used $1.5000" in stopped["stopReason"]
    assert stopped["stopReason"].endswith(
        "spend resumes when the next budget day begins (2026-11-23 00:00 UTC)"
    )


def test_an_agent_budget_counts_calls_that_settle_no_verdict(home, tmp_path):
    """A call no verdict admitted (a subagent's, say) still counts toward its agent's budget."""
    configured(home, BUILDERS)
    transcript = transcript_of(tmp_path, SESSION)
    # No user-prompt-submit and no pre-tool-use: the call settles no verdict.
    spend(transcript, "msg_01A", DOLLAR_AND_A_HALF)
    stopped = hook(home, "post-tool-use", transcript, LEDGER_AGENT="builder-1")
    assert stopped["continue"] is False
    assert f"budget:builders[{SESSION}]" in stopped["stopReason"]
