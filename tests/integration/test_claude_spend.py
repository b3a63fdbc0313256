"""Claude Code spend (SPEC §7): hooks record a session's transcript and gate its next call."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gate_helpers import chain_entries, chain_lines, entry_hash, events_of
from tests.integration.test_agent_helpers import assert_chain_verifies, cli, process_env

REPO = Path(__file__).resolve().parents[2]
HOOKS = REPO / "tests" / "fixtures" / "hooks"
TRANSCRIPTS = REPO / "tests" / "fixtures" / "claude_code"
SESSION = "8c3f2a51-6f0e-4d7b-9a61-2b9f4d1e7c30"
# Stale billing never halts here: these tests are about the cap itself (SPEC §4 rows 6-7).
ENV = {"LEDGER_NOW": "2026-11-22T08:00:00Z", "LEDGER_BILLING_STALE_HALT_PCT": "100"}
PRICES = """
[prices."anthropic/test-sonnet"]
input_per_mtok = 3
output_per_mtok = 15
cache_read_per_mtok = 0.3
cache_write_per_mtok = 3.75
cache_write_1h_per_mtok = 6

[prices."anthropic/test-haiku"]
input_per_mtok = 1
output_per_mtok = 5
"""
# msg A (its final line): 4×3 + 2000×3.75 + 180×15 = 12 + 7,500 + 2,700
A_MICROS = 10_212
# msg B: 3×3 + 500×3.75 + 1000×6 + 12000×0.3 + 95×15 = 9 + 1,875 + 6,000 + 3,600 + 1,425
B_MICROS = 12_909
# msg C (test-haiku): 12000×1 + 400×5
C_MICROS = 14_000
# msg D: 2×3 + 15000×0.3 + 310×15 = 6 + 4,500 + 4,650
D_MICROS = 9_156
PART1 = (TRANSCRIPTS / "session_part1.jsonl").read_bytes()
PART2 = (TRANSCRIPTS / "session_part2.jsonl").read_bytes()


@pytest.fixture
def priced(home):
    path = home / "ledger.toml"
    path.write_text(path.read_text() + PRICES)
    return home


@pytest.fixture
def transcript(tmp_path):
    path = tmp_path / "projects" / f"{SESSION}.jsonl"
    path.parent.mkdir()
    path.write_bytes(PART1)
    return path


def hook_input(event: str, transcript_path: Path | str | None) -> str:
    name = {"PreToolUse": "pre_tool_use_bash", "PostToolUse": "post_tool_use_bash"}.get(event)
    if name is None:
        document = {"session_id": SESSION, "cwd": "/home/dev/repo",
                    "permission_mode": "default", "hook_event_name": event,
                    "stop_hook_active": False}  # fmt: skip
    else:
        document = json.loads((HOOKS / f"{name}.json").read_text())
    document["transcript_path"] = None if transcript_path is None else str(transcript_path)
    return json.dumps(document)


def hook(run_inproc, home, command, transcript_path, env=None):
    event = {"pre-tool-use": "PreToolUse", "post-tool-use": "PostToolUse", "stop": "Stop"}
    stdin = hook_input(event[command], transcript_path)
    return cli(run_inproc, home, "hook", command, env=ENV | (env or {}), stdin=stdin)


def records(home):
    return [entry["payload"] for entry in events_of(home, "budget.record_call")]


VERDICT_TYPES = {"budget.allow", "budget.warn_90", "budget.halt_100", "budget.halt_uncertainty"}


def verdicts(home):
    return [entry for entry in chain_entries(home) if entry["event_type"] in VERDICT_TYPES]


class TestRecording:
    def test_post_tool_use_records_each_call_once_at_its_exact_price(
        self, priced, transcript, run_inproc
    ):
        result = hook(run_inproc, priced, "post-tool-use", transcript)
        assert result.code == 0
        assert result.stderr == ""
        json.loads(result.stdout)
        sealed = records(priced)
        # The split message counts once, with its final usage (180 output tokens, not 2);
        # the <synthetic> notice is not a call.
        assert [r["actual_micros"] for r in sealed] == [A_MICROS, B_MICROS, C_MICROS]
        assert [r["idempotency_key"] for r in sealed] == [
            "anthropic:msg_01AAAAAAAAAAAAAAAAAAAAAA",
            "anthropic:msg_01BBBBBBBBBBBBBBBBBBBBBB",
            "anthropic:msg_01CCCCCCCCCCCCCCCCCCCCCC",
        ]
        assert [r["model_id"] for r in sealed] == ["test-sonnet", "test-sonnet", "test-haiku"]
        assert {r["provider"] for r in sealed} == {"anthropic"}
        assert {r["cycle_id"] for r in sealed} == {SESSION}
        assert sealed[1]["tokens"] == {
            "input": 3, "cache_write_5m": 500, "cache_write_1h": 1000,
            "cache_read": 12000, "output": 95, "reasoning": 0,
        }  # fmt: skip
        assert {r["price_source"] for r in sealed} == {"config"}
        assert_chain_verifies(run_inproc, priced)

    def test_reading_again_records_nothing(self, priced, transcript, run_inproc):
        hook(run_inproc, priced, "post-tool-use", transcript)
        before = (priced / "events.jsonl").read_bytes()
        again = hook(run_inproc, priced, "post-tool-use", transcript)
        assert again.code == 0
        assert again.stderr == ""
        assert (priced / "events.jsonl").read_bytes() == before

    def test_losing_the_cursor_rereads_and_records_nothing_new(
        self, priced, transcript, run_inproc
    ):
        hook(run_inproc, priced, "post-tool-use", transcript)
        shutil.rmtree(priced / "state" / "transcripts")
        hook(run_inproc, priced, "post-tool-use", transcript)
        assert len(records(priced)) == 3
        # The session's figures are rebuilt from the re-read: the estimate is unchanged.
        hook(run_inproc, priced, "pre-tool-use", transcript)
        assert verdicts(priced)[-1]["payload"]["estimated_micros"] == -(
            -(A_MICROS + B_MICROS + C_MICROS) // 3
        )

    def test_the_newest_call_waits_for_stop(self, priced, transcript, run_inproc):
        hook(run_inproc, priced, "post-tool-use", transcript)
        with transcript.open("ab") as handle:
            handle.write(PART2)
        # Nothing is written after msg D yet: its usage may still grow, so
        # PostToolUse leaves it for the next read; Stop records it as it stands.
        hook(run_inproc, priced, "post-tool-use", transcript)
        assert len(records(priced)) == 3
        stopped = hook(run_inproc, priced, "stop", transcript)
        assert stopped.code == 0
        assert stopped.json() == {}
        assert stopped.stderr == ""
        assert [r["actual_micros"] for r in records(priced)][3:] == [D_MICROS]
        hook(run_inproc, priced, "stop", transcript)
        assert len(records(priced)) == 4

    def test_stop_records_the_whole_transcript(self, priced, transcript, run_inproc):
        with transcript.open("ab") as handle:
            handle.write(PART2)
        hook(run_inproc, priced, "stop", transcript)
        assert [r["actual_micros"] for r in records(priced)] == [
            A_MICROS,
            B_MICROS,
            C_MICROS,
            D_MICROS,
        ]

    def test_a_half_written_last_line_is_read_when_whole(self, priced, transcript, run_inproc):
        transcript.write_bytes(PART1 + PART2[:100])
        hook(run_inproc, priced, "stop", transcript)
        assert len(records(priced)) == 3
        transcript.write_bytes(PART1 + PART2)
        hook(run_inproc, priced, "stop", transcript)
        assert [r["actual_micros"] for r in records(priced)][3:] == [D_MICROS]

    @pytest.mark.parametrize("content", [PART2, PART2 + PART1], ids=["shorter", "longer"])
    def test_a_rewritten_transcript_is_read_from_the_start(
        self, priced, transcript, run_inproc, content
    ):
        hook(run_inproc, priced, "post-tool-use", transcript)
        # Not the file that was read: shorter than the cursor's offset, or with
        # other bytes before it (the cursor keeps a hash of the line it ends).
        transcript.write_bytes(content)
        result = hook(run_inproc, priced, "stop", transcript)
        assert result.stderr == ""
        assert [r["actual_micros"] for r in records(priced)][3:] == [D_MICROS]

    def test_malformed_lines_are_skipped_and_named_on_stderr(self, priced, transcript, run_inproc):
        lines = PART1.splitlines(keepends=True)
        broken = json.loads(lines[5])
        del broken["message"]["usage"]["output_tokens"]  # msg B: usage without output_tokens
        lines[5] = json.dumps(broken).encode() + b"\n"
        lines.insert(2, b"{not json\n")
        transcript.write_bytes(b"".join(lines))
        result = hook(run_inproc, priced, "post-tool-use", transcript)
        assert result.code == 0
        json.loads(result.stdout)
        [line] = result.stderr.splitlines()
        assert line.startswith("ledger: claude code spend: skipped 2 transcript line(s) (byte ")
        assert "not JSON" in line
        assert "usage object lacks output_tokens" in line
        # Nothing is guessed for msg B; the readable calls are recorded.
        assert [r["actual_micros"] for r in records(priced)] == [A_MICROS, C_MICROS]

    @pytest.mark.parametrize("problem", ["missing", "directory", "no path"])
    def test_no_readable_transcript_records_nothing(self, priced, tmp_path, run_inproc, problem):
        path: Path | None = tmp_path / "gone.jsonl"
        if problem == "directory":
            (tmp_path / "gone.jsonl").mkdir()
        elif problem == "no path":
            path = None
        for command in ("post-tool-use", "stop"):
            result = hook(run_inproc, priced, command, path)
            assert result.code == 0
            json.loads(result.stdout)
            [line] = result.stderr.splitlines()
            assert line.startswith("ledger: claude code spend: ")
            assert "nothing more recorded" in line
        assert records(priced) == []

    def test_an_unpriced_model_is_recorded_with_null_and_halts(
        self, priced, transcript, run_inproc
    ):
        transcript.write_bytes(PART1.replace(b'"test-haiku"', b'"claude-mystery-9"'))
        result = hook(run_inproc, priced, "post-tool-use", transcript)
        assert "recorded 1 call(s) without a price (claude-mystery-9)" in result.stderr
        assert [r["actual_micros"] for r in records(priced)] == [A_MICROS, B_MICROS, None]
        stopped = hook(run_inproc, priced, "pre-tool-use", transcript).json()
        assert stopped["continue"] is False
        assert stopped["stopReason"].startswith(
            "ledger: USD budget halt-uncertainty (counter_inconsistent): "
        )
        assert "claude-mystery-9" in stopped["stopReason"]


class TestSessionVerdict:
    def test_estimate_is_the_mean_of_the_sessions_calls(self, priced, transcript, run_inproc):
        first = hook(run_inproc, priced, "pre-tool-use", transcript)
        assert first.json() == {}
        hook(run_inproc, priced, "post-tool-use", transcript)
        hook(run_inproc, priced, "pre-tool-use", transcript)
        estimates = [v["payload"]["estimated_micros"] for v in verdicts(priced)]
        # $0.01 before anything is recorded; then the mean, rounded up
        assert estimates == [10_000, -(-(A_MICROS + B_MICROS + C_MICROS) // 3)]
        payload = verdicts(priced)[0]["payload"]
        assert (payload["provider"], payload["cycle_id"]) == ("anthropic", SESSION)

    def test_the_next_call_recorded_settles_the_verdict(self, priced, transcript, run_inproc):
        hook(run_inproc, priced, "pre-tool-use", transcript)
        [line] = [raw for raw in chain_lines(priced) if b'"budget.allow"' in raw]
        usage = cli(run_inproc, priced, "usage", env=ENV).json()
        assert usage["usd_reserved_micros"] == 10_000
        hook(run_inproc, priced, "post-tool-use", transcript)
        first, second = records(priced)[:2]
        assert (first["verdict_ref"], first["settled"]) == (entry_hash(line), True)
        assert (second["verdict_ref"], second["settled"]) == (None, False)
        usage = cli(run_inproc, priced, "usage", env=ENV).json()
        assert usage["usd_reserved_micros"] == 0
        assert usage["usd_used_micros"] == A_MICROS + B_MICROS + C_MICROS

    def test_halt_100_stops_with_the_verdict_as_reason(self, priced, transcript, run_inproc):
        hook(run_inproc, priced, "post-tool-use", transcript)
        spent = A_MICROS + B_MICROS + C_MICROS
        cap = {"LEDGER_USD_DAILY_CAP": f"0.{spent:06d}"}  # the cap is exhausted
        result = hook(run_inproc, priced, "pre-tool-use", transcript, cap)
        assert result.code == 0
        output = result.json()
        # No permissionDecision: next to one, some Claude Code releases ignore the stop.
        assert "hookSpecificOutput" not in output
        assert output["continue"] is False
        reason = output["stopReason"]
        assert reason.startswith(
            "ledger: USD budget halt-100 for 2026-11-22: aggregate cap $0.0371"
        )
        assert "used $0.0371" in reason
        assert verdicts(priced)[-1]["event_type"] == "budget.halt_100"

    def test_warn_90_warns_without_deciding(self, priced, transcript, run_inproc):
        hook(run_inproc, priced, "post-tool-use", transcript)
        # used 37,121 + estimate 12,374 = 49,495 µ$ of a 54,000 µ$ cap: 91.66 %
        result = hook(run_inproc, priced, "pre-tool-use", transcript,
                      {"LEDGER_USD_DAILY_CAP": "0.054"})  # fmt: skip
        output = result.json()
        assert "permissionDecision" not in output["hookSpecificOutput"]
        assert output["systemMessage"].startswith("ledger: USD budget warn-90: aggregate cap")
        assert "(91.7% projected)" in output["systemMessage"]
        assert output["hookSpecificOutput"]["additionalContext"] == output["systemMessage"]

    def test_a_halt_counts_no_tool_call(self, priced, transcript, run_inproc):
        cli(run_inproc, priced, "tools", "create", "b", "--role", "builder", env=ENV)
        hook(run_inproc, priced, "post-tool-use", transcript)
        result = hook(run_inproc, priced, "pre-tool-use", transcript,
                      {"LEDGER_USD_DAILY_CAP": "0.02", "LEDGER_AGENT": "b"})  # fmt: skip
        assert result.json()["continue"] is False
        assert events_of(priced, "hook.pre_tool_use") == []

    def test_without_a_daily_cap_gating_is_off_and_said_once(
        self, tmp_path, transcript, run_inproc
    ):
        home = tmp_path / "no-cap"
        assert cli(run_inproc, home, "init").code == 0
        first = hook(run_inproc, home, "pre-tool-use", transcript).json()
        assert "permissionDecision" not in first["hookSpecificOutput"]
        assert first["systemMessage"].startswith("ledger: USD gating is off: no usd.daily_cap")
        assert hook(run_inproc, home, "pre-tool-use", transcript).json() == {}
        assert verdicts(home) == []
        # The spend is still recorded (priced from the library's snapshot or not).
        hook(run_inproc, home, "post-tool-use", transcript)
        assert len(records(home)) == 3


def test_malformed_stop_input_is_one_stderr_line(home, run_inproc):
    result = cli(run_inproc, home, "hook", "stop", env=ENV, stdin="{not json")
    assert (result.code, result.stdout) == (0, "")
    assert result.stderr.startswith("ledger: hook Stop: malformed input")


def test_hooks_as_real_processes(priced, transcript, run_inproc):
    env = process_env(LEDGER_HOME=str(priced), **ENV)
    for command, event in (("pre-tool-use", "PreToolUse"), ("post-tool-use", "PostToolUse"),
                           ("stop", "Stop")):  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-m", "ledger", "hook", command],
            input=hook_input(event, transcript), capture_output=True, text=True,
            env=env, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        json.loads(proc.stdout)
    assert [r["actual_micros"] for r in records(priced)] == [A_MICROS, B_MICROS, C_MICROS]
    assert_chain_verifies(run_inproc, priced)


def test_config_that_cannot_be_read_still_answers_json(priced, transcript, run_inproc):
    (priced / "ledger.toml").write_text("[usd]\ndaily_cap = 'x'\n")
    for command in ("post-tool-use", "stop"):
        result = hook(run_inproc, priced, command, transcript)
        assert result.code == 0
        json.loads(result.stdout)
        assert "usd.daily_cap" in result.stderr.splitlines()[0]
    denied = hook(run_inproc, priced, "pre-tool-use", transcript).json()["hookSpecificOutput"]
    assert denied["permissionDecision"] == "deny"
    assert denied["permissionDecisionReason"].startswith("ledger: configuration error (")
    assert records(priced) == []


COMMANDS = {"PreToolUse": "hook pre-tool-use", "PostToolUse": "hook post-tool-use",
            "Stop": "hook stop"}  # fmt: skip


def test_the_documented_recipe_works_as_pasted(tmp_path, transcript):
    """The init line and the settings block of the Claude Code page's "By hand", run by a shell."""
    page = REPO / "docs" / "integrations" / "claude-code.md"
    readme = page.read_text().split("## By hand", 1)[1]
    init = readme.split("```sh\n", 1)[1].split("```", 1)[0].split("#", 1)[0].strip()
    settings = json.loads(readme.split("```json\n", 1)[1].split("```", 1)[0])
    deployed = json.loads((REPO / "deploy" / "claude-code" / "settings.json").read_text())
    assert set(settings["hooks"]) <= set(deployed["hooks"])
    assert set(deployed["hooks"]) == {
        "PreToolUse", "PostToolUse", "Stop", "UserPromptSubmit", "SessionEnd"
    }  # fmt: skip
    env = process_env(HOME=str(tmp_path), PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin",
                      LEDGER_BILLING_STALE_HALT_PCT="100")  # fmt: skip
    shell = ["/bin/sh", "-c"]
    assert subprocess.run([*shell, init], env=env, capture_output=True, check=False).returncode == 0
    home = tmp_path / ".ledger"
    with (home / "ledger.toml").open("a") as handle:
        handle.write(PRICES)
    outputs = {}
    for event, command in COMMANDS.items():
        [group] = settings["hooks"][event]
        [entry] = group["hooks"]
        assert entry["command"].endswith(command)
        proc = subprocess.run(
            [*shell, entry["command"]], input=hook_input(event, transcript), env=env,
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        outputs[event] = json.loads(proc.stdout)
    assert outputs["PreToolUse"] == {}
    assert [r["actual_micros"] for r in records(home)] == [A_MICROS, B_MICROS, C_MICROS]
