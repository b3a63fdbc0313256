"""The gate when its counter or its chain cannot be trusted (SPEC §2, §4 row 1).

Torn tails, broken and truncated chains, edited, missing and lagging derived
state, a held chain lock and an unusable signing key. A verdict that cannot be
trusted or recorded is always a printed ``halt-uncertainty`` with exit 1; after
each case the chain still verifies unless the test damaged it on purpose.
"""

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import clean_env, run_process
from tests.gate_helpers import (
    HOLD_LOCK,
    append_without_state,
    chain_entries,
    chain_lines,
    chain_path,
    env_at,
    events_of,
    home_files,
    lock_is_free,
    record_payload,
    state_path,
)

DAY = "2026-03-01"


@pytest.fixture
def ledger(run_inproc, home):
    def run(*args: str, env: dict[str, str] | None = None):
        return run_inproc(["--home", str(home), *args], env if env is not None else env_at())

    return run


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("ledger: ")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def verdict(ledger, amount: str = "1", env=None):
    result = ledger("verdict", amount, env=env)
    document = result.json()
    assert result.code == (0 if document["verdict"] in {"allow", "warn-90"} else 1), result
    return result, document


def assert_inconsistent(result, document) -> None:
    assert result.code == 1, result
    assert document["verdict"] == "halt-uncertainty"
    assert document["uncertainty_reason"] == "counter_inconsistent"
    assert document["diagnostic"]


def verify_ok(ledger) -> int:
    result = ledger("verify-chain")
    assert result.code == 0, result
    return int(result.stdout.split()[1])


def spend(ledger, *amounts: str, provider: str = "openai") -> None:
    for amount in amounts:
        result = ledger("record", amount, "--provider", provider)
        assert result.code == 0, result


# --- torn and corrupt tails ---------------------------------------------------------


def test_torn_tail_halts_verdicts_and_refuses_records(ledger, home):
    spend(ledger, "10", "5")
    assert verdict(ledger)[1]["verdict"] == "allow"
    whole = chain_path(home).read_bytes()
    last = chain_lines(home)[-1]
    with chain_path(home).open("ab") as handle:
        handle.write(last[: len(last) // 2])  # a write cut short
    torn = chain_path(home).read_bytes()

    result, document = verdict(ledger)
    assert_inconsistent(result, document)
    assert document["verdict_ref"] is None
    assert "ledger recover" in one_error_line(result.stderr)
    assert "ledger recover" in document["diagnostic"]
    # it stays until recovered, whatever the amount
    assert_inconsistent(*verdict(ledger, "0"))

    rec = ledger("record", "1", "--provider", "openai")
    assert rec.code == 74, rec
    assert rec.stdout == ""
    assert "ledger recover" in one_error_line(rec.stderr)

    use = ledger("usage")
    assert use.code == 0
    assert use.json()["uncertainty_reason"] == "counter_inconsistent"
    assert chain_path(home).read_bytes() == torn  # nothing was built on the torn line

    broken = ledger("verify-chain")
    assert broken.code == 1
    assert f"BROKEN line {len(chain_lines(home))}" in broken.stderr

    # a real process sees the same
    env = clean_env(**env_at())
    proc = run_process(["--home", str(home), "verdict", "1"], env=env)
    assert proc.code == 1
    assert proc.json()["uncertainty_reason"] == "counter_inconsistent"
    assert "ledger recover" in proc.stderr
    assert run_process(["--home", str(home), "record", "1", "--provider", "x"], env=env).code == 74

    # the operator's way out
    assert ledger("recover").code == 0
    assert chain_path(home).read_bytes().startswith(whole)
    result, document = verdict(ledger)
    assert result.code == 0, result
    assert document["usd_used"] == 15
    verify_ok(ledger)


def test_complete_but_corrupt_last_line_halts_and_refuses(ledger, home):
    spend(ledger, "3")
    with chain_path(home).open("ab") as handle:
        handle.write(b"this is not an envelope\n")
    assert_inconsistent(*verdict(ledger))
    rec = ledger("record", "1", "--provider", "openai")
    assert rec.code == 74, rec
    one_error_line(rec.stderr)


# --- broken and shortened chains ------------------------------------------------------


def tamper_middle_line(home: Path) -> int:
    """Cut a recorded spend in a middle line (a one-byte edit); returns its line number."""
    lines = chain_lines(home)
    middle = len(lines) // 2
    while b'"actual_micros":5000000' not in lines[middle]:
        middle += 1
    lines[middle] = lines[middle].replace(b'"actual_micros":5000000', b'"actual_micros":1000000')
    chain_path(home).write_bytes(b"".join(lines))
    return middle + 1


def test_broken_middle_line_is_caught_when_state_is_rebuilt(ledger, home):
    for _ in range(6):
        verdict(ledger, "5")
        spend(ledger, "5")
    line = tamper_middle_line(home)
    state_path(home).unlink()  # the gate must rebuild from the chain and verify it
    result, document = verdict(ledger)
    assert_inconsistent(result, document)
    assert f"line {line}" in document["diagnostic"]
    assert "recover" in document["diagnostic"]
    assert ledger("usage").json()["uncertainty_reason"] == "counter_inconsistent"
    assert not state_path(home).exists()  # an untrusted fold is never stored
    assert_inconsistent(*verdict(ledger, "0"))
    broken = ledger("verify-chain")
    assert broken.code == 1
    assert f"BROKEN line {line}:" in broken.stderr
    rebuild = ledger("rebuild-state")
    assert rebuild.code != 0  # a chain that does not verify cannot be the counter's source
    one_error_line(rebuild.stderr)


def test_broken_line_in_the_tail_the_state_has_not_seen(ledger, home):
    spend(ledger, "1")
    verdict(ledger)
    saved = state_path(home).read_bytes()
    for _ in range(4):
        spend(ledger, "5")
    state_path(home).write_bytes(saved)  # state now lags the chain by 4 entries
    lines = chain_lines(home)
    lines[-2] = lines[-2].replace(b'"actual_micros":5000000', b'"actual_micros":1000000')
    chain_path(home).write_bytes(b"".join(lines))
    result, document = verdict(ledger)
    assert_inconsistent(result, document)
    # the diagnostic names the damaged line as verify-chain counts it (from line 1)
    damaged = len(lines) - 1
    assert f"BROKEN line {damaged}:" in ledger("verify-chain").stderr
    assert f"line {damaged}:" in document["diagnostic"], document["diagnostic"]


def test_a_shortened_chain_is_not_a_fresh_day(ledger, home):
    spend(ledger, "40", "40")
    verdict(ledger, "1")
    lines = chain_lines(home)
    chain_path(home).write_bytes(b"".join(lines[:-2]))  # whole lines cut off the end
    assert_inconsistent(*verdict(ledger))
    chain_path(home).unlink()  # or the whole chain
    assert_inconsistent(*verdict(ledger))
    assert ledger("usage").json()["uncertainty_reason"] == "counter_inconsistent"


# --- derived state -------------------------------------------------------------------


def test_tampered_state_halts_until_rebuild_state(ledger, home):
    spend(ledger, "60")
    verdict(ledger, "10")
    path = state_path(home)
    body, mac = path.read_bytes().rstrip(b"\n").split(b"\n")
    assert b"60000000" in body
    path.write_bytes(body.replace(b"60000000", b"10000000", 1) + b"\n" + mac + b"\n")
    result, document = verdict(ledger, "1")
    assert_inconsistent(result, document)
    assert "rebuild-state" in document["diagnostic"]
    assert document["verdict_ref"] is not None  # the halt itself is recorded
    assert chain_entries(home)[-1]["event_type"] == "budget.halt_uncertainty"
    assert_inconsistent(*verdict(ledger, "0"))  # stays
    usage = ledger("usage")
    assert usage.json()["uncertainty_reason"] == "counter_inconsistent"
    # spend is never refused, even now
    spend(ledger, "5")

    rebuilt = ledger("rebuild-state")
    assert rebuilt.code == 0, rebuilt
    report = rebuilt.json()
    assert report["previous_state"] == "mismatched"
    entries = chain_entries(home)
    assert entries[-1]["event_type"] == "ledger.state_rebuilt"
    assert report["entry_hash"]
    assert report["entries"] == len(entries) - 1

    result, document = verdict(ledger, "1")
    assert result.code == 0, result
    assert document["verdict"] == "allow"
    assert document["usd_used"] == 65  # the true figure, from the chain
    assert document["usd_reserved"] == 10
    assert verify_ok(ledger) == len(chain_lines(home))


@pytest.mark.parametrize("damage", ["garbage", "empty", "mac_key_gone", "mac_line_gone"])
def test_unreadable_state_halts(ledger, home, damage):
    spend(ledger, "7")
    path = state_path(home)
    if damage == "garbage":
        path.write_bytes(b"{not json\nfeedface\n")
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "mac_key_gone":
        (home / "keys" / "state-mac.key").unlink()
    else:
        path.write_bytes(path.read_bytes().split(b"\n")[0] + b"\n")
    assert_inconsistent(*verdict(ledger))
    assert ledger("rebuild-state").code == 0
    result, document = verdict(ledger)
    assert result.code == 0, result
    assert document["usd_used"] == 7
    verify_ok(ledger)


def test_missing_state_is_rebuilt_silently(ledger, home):
    spend(ledger, "30", "12.5")
    verdict(ledger, "2")
    state_path(home).unlink()
    result, document = verdict(ledger, "1")
    assert result.code == 0, result
    assert document["verdict"] == "allow"
    assert document["usd_used"] == 42.5
    assert document["usd_reserved"] == 2
    assert state_path(home).exists()
    assert events_of(home, "ledger.state_rebuilt") == []  # silent: no operator event
    shutil.rmtree(home / "state")  # the whole folder
    result, document = verdict(ledger, "1")
    assert result.code == 0, result
    assert document["usd_reserved"] == 3
    verify_ok(ledger)


def test_state_lagging_the_chain_is_caught_up(ledger, home):
    verdict(ledger, "1")
    before = state_path(home).read_bytes()
    for _ in range(3):
        append_without_state(home, env_at(), "budget.record_call", record_payload(10_000_000, DAY))
    assert state_path(home).read_bytes() == before  # the writer did not touch the state
    result, document = verdict(ledger, "1")
    assert result.code == 0, result
    assert document["usd_used"] == 30
    assert document["counter_age_seconds"] == 0
    # the caught-up state is stored and bound to the new head
    assert state_path(home).read_bytes() != before
    result, document = verdict(ledger, "60")
    assert document["verdict"] == "warn-90"  # 30 + 2 reserved + 60
    verify_ok(ledger)


def test_an_older_copy_of_the_state_is_caught_up_not_trusted(ledger, home):
    verdict(ledger, "1")
    old = state_path(home).read_bytes()
    spend(ledger, "50")
    state_path(home).write_bytes(old)  # a valid but stale state (e.g. restored from a backup)
    result, document = verdict(ledger, "1")
    assert result.code == 0
    assert document["usd_used"] == 50


def test_lagging_state_is_caught_up_across_a_key_rotation(ledger, home):
    spend(ledger, "10")
    verdict(ledger, "1")
    old = state_path(home).read_bytes()
    rotated = ledger("keys", "rotate")
    assert rotated.code == 0, rotated
    spend(ledger, "20")
    state_path(home).write_bytes(old)  # the tail to verify is signed by both keys
    result, document = verdict(ledger, "1")
    assert result.code == 0, result
    assert document["usd_used"] == 30
    assert document["usd_reserved"] == 1
    verify_ok(ledger)


# --- a held lock, an unusable key ---------------------------------------------------


class LockHolder:
    """A real process that holds ``flock`` on ``events.jsonl.lock`` until released."""

    def __init__(self, lock: Path) -> None:
        self.lock = lock
        self.proc: subprocess.Popen[str] | None = None

    def hold(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(self.lock)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def lock_holder(home):
    holder = LockHolder(home / "events.jsonl.lock")
    yield holder
    holder.release()


def test_lock_timeout(ledger, home, lock_holder):
    spend(ledger, "20")
    lock_holder.hold()
    before = home_files(home)
    env = clean_env(**env_at(LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS="1"))
    start = time.monotonic()
    result = run_process(["--home", str(home), "verdict", "1"], env=env)
    waited = time.monotonic() - start
    assert result.code == 1, result
    document = result.json()
    assert document["verdict"] == "halt-uncertainty"
    assert document["uncertainty_reason"] == "counter_inconsistent"
    assert document["verdict_ref"] is None
    assert "lock" in one_error_line(result.stderr)
    assert 0.9 <= waited < 8

    rec = run_process(["--home", str(home), "record", "1", "--provider", "openai"], env=env)
    assert rec.code == 75, rec
    assert rec.stdout == ""
    assert "lock" in one_error_line(rec.stderr)
    assert home_files(home) == before  # nothing was written while the lock was held

    lock_holder.release()
    assert lock_is_free(home / "events.jsonl.lock")
    result, document = verdict(ledger, "1")
    assert result.code == 0, result
    assert document["usd_used"] == 20
    verify_ok(ledger)


@pytest.mark.parametrize("problem", ["mode_0644", "missing"])
def test_unusable_signing_key_halts(ledger, home, problem):
    spend(ledger, "20")
    (key,) = (home / "keys").glob("*.key.pem")
    if problem == "mode_0644":
        key.chmod(0o644)
    else:
        key.rename(key.with_suffix(".away"))
    before = chain_path(home).read_bytes()
    result, document = verdict(ledger, "1")
    assert result.code == 1
    assert document["verdict"] == "halt-uncertainty"
    assert document["uncertainty_reason"] == "counter_inconsistent"
    assert document["verdict_ref"] is None
    assert "key" in one_error_line(result.stderr)
    proc = run_process(["--home", str(home), "verdict", "1"], env=clean_env(**env_at()))
    assert proc.code == 1
    assert proc.json()["verdict"] == "halt-uncertainty"
    rec = ledger("record", "1", "--provider", "openai")
    assert rec.code not in (0, 1), rec  # refused with its own code, never a silent success
    one_error_line(rec.stderr)
    assert chain_path(home).read_bytes() == before

    if problem == "mode_0644":
        key.chmod(0o600)
    else:
        key.with_suffix(".away").rename(key)
    result, document = verdict(ledger, "1")
    assert result.code == 0, result
    assert document["usd_used"] == 20
    verify_ok(ledger)


def test_unrecorded_halt_reports_the_real_figures(ledger, home):
    """With a readable, verified counter and only the key unusable, the printed halt
    still shows today's real figures (SPEC §3: usd_remaining = cap − used − reserved),
    not a $0-spent day that would tell a hook the whole cap is left."""
    spend(ledger, "20")
    verdict(ledger, "5")
    (key,) = (home / "keys").glob("*.key.pem")
    key.chmod(0o644)
    _result, document = verdict(ledger, "1")
    assert document["verdict"] == "halt-uncertainty"
    assert document["usd_used"] == 20
    assert document["usd_reserved"] == 5
    assert document["usd_remaining"] == 75
    assert document["counter_age_seconds"] == 0
