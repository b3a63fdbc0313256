"""The fail-open and crash paths found by adversarial testing stay closed.

Each test is one reproduction: before the fix it allowed, crashed (exit 70)
or lost spend; now it halts ``counter_inconsistent`` naming what it saw, or is
a bad command line that writes nothing.
"""

import datetime as dt
import shutil

import pytest

from tests.gate_helpers import append_raw_entry
from tests.integration.test_agent_helpers import cli

NOW = {"LEDGER_NOW": "2026-06-01T12:00:00Z"}
MOMENT = dt.datetime(2026, 6, 1, 12, 0, 1, tzinfo=dt.UTC)


@pytest.fixture
def home10(tmp_path, run_inproc):
    path = tmp_path / "a"
    assert run_inproc(["--home", str(path), "init", "--daily-cap-usd", "10"]).code == 0
    return path


def _halts_inconsistent(result, *words):
    body = result.json()
    assert result.code == 1, result.stdout
    assert body["verdict"] == "halt-uncertainty", body
    assert body["uncertainty_reason"] == "counter_inconsistent", body
    for word in words:
        assert word in body["diagnostic"], body["diagnostic"]
    return body


def test_cut_chain_with_an_old_copy_of_the_state_halts(home10, run_inproc, tmp_path):
    assert cli(run_inproc, home10, "verdict", "0.5", env=NOW).code == 0
    shutil.copytree(home10 / "state", tmp_path / "old-state")
    size = (home10 / "events.jsonl").stat().st_size
    for _ in range(3):
        cli(run_inproc, home10, "record", "3", "--provider", "openai", env=NOW)
    assert cli(run_inproc, home10, "checkpoint", env=NOW).code == 0
    with (home10 / "events.jsonl").open("r+b") as chain:
        chain.truncate(size)
    shutil.rmtree(home10 / "state")
    shutil.copytree(tmp_path / "old-state", home10 / "state")
    _halts_inconsistent(cli(run_inproc, home10, "verdict", "1", env=NOW), "checkpoint")
    assert cli(run_inproc, home10, "usage", env=NOW).json()["uncertainty_reason"] == (
        "counter_inconsistent"
    )


@pytest.mark.parametrize(
    ("event_type", "payload"),
    [
        ("budget.spend", {"provider": "openai", "actual_micros": 9_000_000}),
        ("tokens.usage", {"convoy": "cv", "agent": "a1", "tokens": 800}),
        (
            "tokens.record",
            {"convoy": "cv", "agent": "a1", "input_tokens": -800, "output_tokens": 0,
             "check_ref": None, "settled_ref": None, "known_convoy": True},
        ),
        (
            "tokens.record",
            {"convoy": "cv", "agent": "a1", "input_tokens": "5e5", "output_tokens": 0,
             "check_ref": None, "settled_ref": None, "known_convoy": True},
        ),
    ],
)  # fmt: skip
def test_forged_entries_the_gate_cannot_read_halt_it(home10, run_inproc, event_type, payload):
    cli(run_inproc, home10, "tokens", "create", "cv", "--agent-max", "1000", env=NOW)
    cli(run_inproc, home10, "tokens", "record", "cv", "a1", "900", "0", env=NOW)
    append_raw_entry(home10, NOW, event_type, payload, MOMENT, validate=False)
    assert cli(run_inproc, home10, "verify-chain", env=NOW).code == 0  # it verifies
    _halts_inconsistent(cli(run_inproc, home10, "verdict", "1", env=NOW), "line 3", event_type)
    check = cli(run_inproc, home10, "tokens", "check", "cv", "a1", "800", env=NOW)
    assert check.code == 1
    assert check.json()["reason"] == "counter_inconsistent"


@pytest.mark.parametrize("amount", ["5", 5000000.5])
def test_a_forged_record_with_an_unreadable_amount_halts_every_command(home10, run_inproc, amount):
    record = {"provider": "openai", "actual_micros": amount, "utc_day": "2026-06-01",
              "verdict_ref": None, "settled": False}  # fmt: skip
    append_raw_entry(home10, NOW, "budget.record_call", record, MOMENT, validate=False)
    _halts_inconsistent(cli(run_inproc, home10, "verdict", "1", env=NOW), "line 1")
    for args in (
        ["usage"],
        ["record", "1", "--provider", "openai"],
        ["status", "--json"],
        ["tokens", "check", "c", "a", "1"],
        ["tools", "check", "x"],
        ["turns", "check", "w"],
        ["time", "status"],
        ["rebuild-state"],
    ):
        result = cli(run_inproc, home10, *args, env=NOW)
        assert result.code in {0, 1}, (args, result.code, result.stderr)
        assert "internal error" not in result.stderr, args


def test_key_compromise_runbook_revoke_then_recover(home10, run_inproc):
    cli(run_inproc, home10, "record", "2", "--provider", "openai", env=NOW)
    key_id = next(p.name for p in (home10 / "keys").glob("*.key.pem")).split(".")[0]
    record = {"provider": "openai", "actual_micros": "5", "utc_day": "2026-06-01",
              "verdict_ref": None, "settled": False}  # fmt: skip
    append_raw_entry(home10, NOW, "budget.record_call", record, MOMENT, validate=False)
    later = {"LEDGER_NOW": "2026-06-01T12:05:00Z"}
    _halts_inconsistent(cli(run_inproc, home10, "verdict", "1", env=later), "line 2")
    # The runbook: a new key, then revoke the compromised one from the bad entry's time.
    assert cli(run_inproc, home10, "keys", "rotate", env=later).code == 0
    revoked = cli(run_inproc, home10, "keys", "revoke", key_id, "--at",
                  "2026-06-01T12:00:01Z", "--reason", "compromised", env=later)  # fmt: skip
    assert revoked.code == 0, revoked.stderr
    assert cli(run_inproc, home10, "verify-chain", env=later).code == 1
    recovered = cli(run_inproc, home10, "recover", env=later)
    assert recovered.code == 0, recovered.stderr
    assert list((home10 / "evidence").iterdir())
    assert cli(run_inproc, home10, "verify-chain", env=later).code == 0
    verdict = cli(run_inproc, home10, "verdict", "1", env=later)
    assert verdict.code == 0, verdict.stdout
    assert verdict.json()["usd_used_micros"] == 2_000_000


def test_a_revocation_is_in_effect_for_the_next_verdict(home10, run_inproc):
    cli(run_inproc, home10, "record", "2", "--provider", "openai", env=NOW)
    old = next(p.name for p in (home10 / "keys").glob("*.key.pem")).split(".")[0]
    assert cli(run_inproc, home10, "keys", "rotate", env=NOW).code == 0
    assert cli(run_inproc, home10, "verdict", "0.5", env=NOW).code == 0
    revoke = cli(run_inproc, home10, "keys", "revoke", old, "--reason", "compromised", env=NOW)
    assert revoke.code == 0, revoke.stderr
    assert cli(run_inproc, home10, "verify-chain", env=NOW).code == 1
    _halts_inconsistent(cli(run_inproc, home10, "verdict", "1", env=NOW), "line 1")


def test_arguments_the_chain_cannot_hold_are_bad_command_lines(home10, run_inproc):
    for args in (
        ["--input-tokens", "9007199254740993"],
        ["--output-tokens", "9007199254740992"],
    ):
        result = cli(run_inproc, home10, "record", "1", "--provider", "openai", *args, env=NOW)
        assert result.code == 2, (args, result.stderr)
    assert not (home10 / "events.jsonl").exists()


def test_text_that_is_not_utf8_is_a_bad_command_line(home10):
    import subprocess
    import sys

    from tests.conftest import clean_env

    for option in ("--model-id", "--cycle-id"):
        proc = subprocess.run(
            [sys.executable, "-m", "ledger", "--home", str(home10), "record", "1",
             "--provider", "openai", option, b"\xff\xfe".decode("utf-8", "surrogateescape")],
            capture_output=True, env=clean_env(**NOW), check=False,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert b"UTF-8" in proc.stderr
    assert not (home10 / "events.jsonl").exists()


def test_a_day_past_what_the_chain_can_hold_still_prints_a_halt(home10, run_inproc):
    assert cli(run_inproc, home10, "record", "9007199254.740991", "--provider", "openai",
               env=NOW).code == 0  # fmt: skip
    assert cli(run_inproc, home10, "record", "0.000001", "--provider", "openai",
               env=NOW).code == 0  # fmt: skip
    result = cli(run_inproc, home10, "verdict", "1", env=NOW)
    assert result.code == 1
    body = result.json()
    assert body["verdict"].startswith("halt")


def test_a_writer_key_revoked_by_hand_signs_nothing(home10, run_inproc):
    import json

    assert cli(run_inproc, home10, "verdict", "1", env=NOW).code == 0
    trust = json.loads((home10 / "trust.json").read_text())
    active = trust["keys"][0]["key_id"]
    trust["revocations"].append(
        {"key_id": active, "revoked_at": "2026-06-01T12:00:00.500000Z", "reason": "by hand"}
    )
    (home10 / "trust.json").write_text(json.dumps(trust))
    size = (home10 / "events.jsonl").stat().st_size
    later = {"LEDGER_NOW": "2026-06-01T12:01:00Z"}
    body = _halts_inconsistent(cli(run_inproc, home10, "verdict", "1", env=later), "revoked")
    assert body["verdict_ref"] is None
    assert (home10 / "events.jsonl").stat().st_size == size
    assert cli(run_inproc, home10, "verify-chain", env=later).code == 0
