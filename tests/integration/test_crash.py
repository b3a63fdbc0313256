"""Crashes: a writer killed at any moment never loses an acknowledged entry, and a
torn tail is never built upon (SPEC §2, Writing)."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.core.chain import verify_lines
from ledger.core.envelope import parse_line
from ledger.edges.files.chainfile import read_head
from ledger.edges.files.keyfiles import KeyDir
from ledger.errors import EXIT_IO, TornTailError
from ledger.runtime import Runtime
from ledger.services.chain.writer import Writer
from tests.conftest import REPO, clean_env
from tests.helpers.chains import record_payload

ROUNDS = 10


def _file_lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _kill_one_writer(home: Path, delay: float) -> list[str]:
    """Start a looping writer, SIGKILL it after ``delay`` s; the hashes it acknowledged."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.append_worker", "loop", str(home)],
        cwd=REPO,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # appending has begun
        assert first.endswith(b"\n"), proc.stderr.read() if proc.stderr else b""
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        rest, _err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    acknowledged = (first + rest).split(b"\n")
    # A hash is acknowledged only once its whole line (with newline) reached the pipe.
    return [item.decode() for item in acknowledged[:-1] if item]


def test_sigkill_never_loses_acknowledged_entries(home):
    """After each of 10 kills at random moments the chain verifies, or only its last line is
    torn; every hash the writer acknowledged is in the file."""
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    chain = home / "events.jsonl"
    trust = KeyDir(home).load_trust()
    acknowledged: list[str] = []
    torn_rounds = 0
    for round_number in range(ROUNDS):
        context = f"seed {seed}, round {round_number}"
        acknowledged += _kill_one_writer(home, rng.uniform(0.0, 0.25))
        lines = _file_lines(chain)
        report = verify_lines(lines, trust)
        if not report.ok:
            assert report.line == len(lines), f"{context}: {report}"
            assert report.reason == "torn line (no newline at end of file)", context
            with pytest.raises(TornTailError):
                read_head(chain)
            torn_rounds += 1
            lines = lines[:-1]  # what `ledger recover` would keep
            chain.write_bytes(b"".join(lines))
        present = {parse_line(raw[:-1]).entry_hash for raw in lines}
        missing = [h for h in acknowledged if h not in present]
        assert not missing, f"{context}: acknowledged entries lost: {missing[:3]}"
    assert len(acknowledged) >= ROUNDS
    assert verify_lines(_file_lines(chain), trust).ok


def _tear(home: Path) -> bytes:
    """Append a cut-short line to the home's chain; returns the file's bytes."""
    Writer(Runtime(home)).append_one("budget.record_call", record_payload(0))
    Writer(Runtime(home)).append_one("budget.record_call", record_payload(1))
    chain = home / "events.jsonl"
    whole = chain.read_bytes()
    last = whole.splitlines(keepends=True)[-1]
    chain.write_bytes(whole + last[: len(last) // 2])
    return chain.read_bytes()


class TestTornTail:
    def test_cli_append_refused_with_exit_74(self, run_inproc, home):
        """An append after a torn tail (keys rotate appends) exits 74, names `ledger recover`,
        and leaves the file untouched."""
        before = _tear(home)
        trust_before = (home / "trust.json").read_bytes()
        result = run_inproc(["--home", str(home), "keys", "rotate"])
        assert result.code == EXIT_IO, result
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("ledger: ")
        assert "ledger recover" in lines[0]
        assert (home / "events.jsonl").read_bytes() == before
        assert (home / "trust.json").read_bytes() == trust_before

    def test_writer_refuses(self, home):
        """Writer.append_one raises TornTailError (exit 74) and appends nothing."""
        before = _tear(home)
        with pytest.raises(TornTailError, match="ledger recover") as info:
            Writer(Runtime(home)).append_one("budget.record_call", record_payload(2))
        assert info.value.exit_code == EXIT_IO
        assert (home / "events.jsonl").read_bytes() == before

    def test_read_head_reports_torn_tail(self, home):
        """read_head raises TornTailError for a last line without newline."""
        _tear(home)
        with pytest.raises(TornTailError):
            read_head(home / "events.jsonl")

    def test_verify_chain_reports_torn_line(self, run_inproc, home):
        """verify-chain names the torn last line."""
        _tear(home)
        result = run_inproc(["--home", str(home), "verify-chain"])
        assert result.code == 1
        assert result.stderr == "BROKEN line 3: torn line (no newline at end of file)\n"

    def test_checkpoint_refused(self, run_inproc, home):
        """No checkpoint is signed over a torn chain."""
        _tear(home)
        result = run_inproc(["--home", str(home), "checkpoint"])
        assert result.code == 1
        assert "BROKEN line 3" in result.stderr
        assert not list(home.glob("checkpoints/*.json"))
