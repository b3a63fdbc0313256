"""`ledger daemon`: the real APScheduler runs the real jobs, and SIGTERM stops it cleanly."""

import json
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.conftest import clean_env, run_process


def observer_env(tmp_path: Path) -> dict[str, str]:
    script = tmp_path / "observer.py"
    script.write_text(
        "#!/usr/bin/env python3\nimport datetime, json\n"
        "now = datetime.datetime.now(datetime.timezone.utc).isoformat()\n"
        "print(json.dumps({'usd_used': 0.5, 'billing_ts': now, 'server_ts': now}))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {"LEDGER_OBSERVER_COMMAND": json.dumps([str(script)])}


class Lines:
    """Collects a process's stderr lines in a thread."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def join(self, timeout: float = 10) -> None:
        """Wait for the reader to see the end of the stream."""
        self._thread.join(timeout)

    def wait_for(self, needle: str, count: int = 1, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(needle in line for line in self.lines) >= count:
                return True
            time.sleep(0.05)
        return False


def test_daemon_runs_reconcile_and_snapshot_then_stops_on_sigterm(home: Path, tmp_path: Path):
    """Reconcile runs at start and every interval; a missed daily snapshot runs at start."""
    env = clean_env(
        LEDGER_RECONCILE_INTERVAL_HOURS="0.0005",  # 1.8 s
        **observer_env(tmp_path),
    )
    assert (
        run_process(["--home", str(home), "record", "0.5", "--provider", "openai"], env).code == 0
    )
    notify = tmp_path / "notify.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(notify))
    listener.settimeout(30)
    env["NOTIFY_SOCKET"] = str(notify)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "daemon"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        lines = Lines(proc.stderr)
        assert listener.recv(64) == b"READY=1"
        assert lines.wait_for("reconcile aggregate: ok", count=2), lines.lines
        # Money in the log is in dollars, never bare micro-dollars.
        reconciled = next(line for line in lines.lines if "reconcile aggregate: ok" in line)
        assert " counter=$0.50 billing=$" in reconciled, reconciled
        assert lines.wait_for("snapshot: "), lines.lines
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
        assert time.monotonic() - started < 2
        assert lines.wait_for("stopped", timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
        listener.close()
    events = [
        json.loads(line)["event_type"] for line in (home / "events.jsonl").read_text().splitlines()
    ]
    assert events.count("budget.reconcile") >= 2
    assert "ledger.snapshot" in events
    assert list((home / "snapshots").iterdir())
    assert run_process(["--home", str(home), "verify-chain"], env).code == 0


def test_daemon_stops_on_sigint(home: Path):
    """SIGINT stops it as cleanly as SIGTERM."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "daemon"],
        env=clean_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = Lines(proc.stderr)
    assert lines.wait_for("started")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=5) == 0
    assert proc.stderr is not None
    proc.stderr.close()


def test_daemon_refuses_ledger_now(home: Path):
    """The daemon schedules on the real clock only: LEDGER_NOW is a config error."""
    result = run_process(
        ["--home", str(home), "daemon"], clean_env(LEDGER_NOW="2026-11-22T00:00:00Z")
    )
    assert result.code == 78
    assert result.stderr.startswith("ledger: LEDGER_NOW")


def test_daemon_rejects_bad_cron(home: Path):
    """A cron APScheduler cannot parse is a config error naming snapshot.cron."""
    result = run_process(
        ["--home", str(home), "daemon"], clean_env(LEDGER_SNAPSHOT_CRON="99 99 * * *")
    )
    assert result.code == 78
    assert "snapshot.cron" in result.stderr


def _start_daemon(home: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Lines]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "daemon", "--no-serve"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    return proc, Lines(proc.stderr)


def _stop_daemon(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert proc.stderr is not None
    proc.stderr.close()


def _edit_a_record_in_place(home: Path) -> int:
    for _ in range(3):
        assert run_process(["--home", str(home), "record", "0.5", "--provider", "openai"]).code == 0
    chain = home / "events.jsonl"
    lines = chain.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"actual_micros":500000', '"actual_micros":400000')
    chain.write_text("".join(lines))
    return 2


def test_daemon_verifies_the_chain_at_start_and_its_finding_halts_the_gate(home: Path):
    """A BROKEN finding of the daemon's own full verification halts every verdict."""
    line = _edit_a_record_in_place(home)
    admitted = run_process(["--home", str(home), "verdict", "0.1"], env=clean_env())
    assert admitted.json()["verdict"] == "allow"  # the incremental gate cannot see the edit
    proc, lines = _start_daemon(home, clean_env())
    try:
        assert lines.wait_for(f"verify: BROKEN line {line}: "), lines.lines
        assert lines.wait_for("verify every 24 h"), lines.lines
    finally:
        _stop_daemon(proc)
    halted = run_process(["--home", str(home), "verdict", "0.1"], env=clean_env())
    assert halted.code == 1
    assert halted.json()["uncertainty_reason"] == "counter_inconsistent"
    assert f"line {line}" in halted.json()["diagnostic"]


def test_daemon_verification_off_at_zero(home: Path):
    """chain.verify_interval_hours = 0 schedules no verification."""
    _edit_a_record_in_place(home)
    proc, lines = _start_daemon(home, clean_env(LEDGER_CHAIN_VERIFY_INTERVAL_HOURS="0"))
    try:
        assert lines.wait_for("verify off"), lines.lines
    finally:
        _stop_daemon(proc)
    assert not any("verify:" in line for line in lines.lines)
