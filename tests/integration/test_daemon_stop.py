"""`ledger daemon` stops promptly on SIGTERM whenever it comes: real processes, real signals.

The kernel hands a signal sent to a process to any of its threads, so these tests
also send SIGTERM to one thread other than the main one (``tgkill``), as the
kernel now and then does. The daemon runs on the real clock (it refuses
``LEDGER_NOW``); nothing here depends on the date.
"""

import ctypes
import json
import os
import platform
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests.conftest import clean_env, run_process
from tests.integration.test_daemon import Lines

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")

# Generous: a daemon with nothing running stops at once; these only catch a hang.
_EXIT_SECONDS = 20
_SYS_TGKILL = {"x86_64": 234, "aarch64": 131}


def tgkill(pid: int, tid: int, sig: int) -> None:
    """Send ``sig`` to thread ``tid`` of process ``pid`` (not to the process as a whole)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if hasattr(libc, "tgkill"):
        result = libc.tgkill(pid, tid, sig)
    elif platform.machine() in _SYS_TGKILL:
        result = libc.syscall(_SYS_TGKILL[platform.machine()], pid, tid, sig)
    else:
        pytest.skip("no tgkill on this platform")
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


def other_threads(pid: int) -> list[int]:
    """The ids of the process's threads other than its main one."""
    return sorted(int(t.name) for t in Path(f"/proc/{pid}/task").iterdir() if int(t.name) != pid)


@contextmanager
def daemon(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], Lines]]:
    """A real ``ledger daemon`` process; killed on the way out if it is still running,
    with the server it may have started (so no child keeps its stderr open)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "daemon", *args],
        env=env or clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines = Lines(proc.stderr)
    try:
        yield proc, lines
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()


def exit_code(proc: subprocess.Popen[str], lines: Lines) -> int:
    """The exit code, which must come within ``_EXIT_SECONDS``."""
    try:
        return proc.wait(timeout=_EXIT_SECONDS)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"no exit within {_EXIT_SECONDS} s of SIGTERM: {lines.lines}"
        ) from None


@pytest.mark.parametrize("serve", [False, True], ids=["no-serve", "serve"])
def test_sigterm_taken_by_a_thread_other_than_the_main_one_stops_it(
    home: Path, serve: bool, tmp_path: Path
):
    """The main thread waits for the stop however the signal reached the process."""
    # An observer, so that the start-up reconcile runs (without one there is none).
    env = slow_observer_env(tmp_path, tmp_path / "observed")
    with daemon(home, *([] if serve else ["--no-serve"]), env=env) as (proc, lines):
        assert lines.wait_for("started:"), lines.lines
        assert lines.wait_for("reconcile aggregate: "), lines.lines  # the start-up job ran
        threads = other_threads(proc.pid)
        assert threads, "the daemon runs no thread besides its main one"
        tgkill(proc.pid, threads[-1], signal.SIGTERM)
        assert exit_code(proc, lines) == 0, lines.lines
        assert lines.wait_for("received SIGTERM, stopping", timeout=5), lines.lines
        assert lines.wait_for("stopped", timeout=5), lines.lines
    assert not (home / "gate.sock").exists()


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3, 0.5, 0.8, 1.2, 2.0])
def test_sigterm_at_any_moment_of_start_up_stops_it_promptly(home: Path, delay: float):
    """Before its handler is in place the default action ends it (-SIGTERM, nothing
    started); from then on it stops cleanly and exits 0. Never a hang."""
    recorded = run_process(["--home", str(home), "record", "0.5", "--provider", "openai"])
    assert recorded.code == 0, recorded.stderr
    with daemon(home, "--no-serve") as (proc, lines):
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        code = exit_code(proc, lines)
        assert code in (0, -signal.SIGTERM), lines.lines
        if code == 0:
            assert lines.wait_for("stopped", timeout=5), lines.lines
    assert run_process(["--home", str(home), "verify-chain"], clean_env()).code == 0


def slow_observer_env(tmp_path: Path, marker: Path) -> dict[str, str]:
    """An observer that says it started (``marker``), then takes 2 s to answer."""
    script = tmp_path / "slow_observer.py"
    script.write_text(
        "#!/usr/bin/env python3\nimport datetime, json, pathlib, time\n"
        f"pathlib.Path({str(marker)!r}).touch()\n"
        "time.sleep(2)\n"
        "now = datetime.datetime.now(datetime.timezone.utc).isoformat()\n"
        "print(json.dumps({'usd_used': 0.5, 'billing_ts': now, 'server_ts': now}))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return clean_env(LEDGER_OBSERVER_COMMAND=json.dumps([str(script)]))


@pytest.mark.parametrize("to_a_thread", [False, True], ids=["process", "thread"])
def test_sigterm_while_a_job_runs_lets_it_finish_then_exits(
    home: Path, tmp_path: Path, to_a_thread: bool
):
    """The reconcile at start is mid-observer when SIGTERM comes: it completes and
    appends its entry whole, then the daemon says it stopped and exits 0."""
    marker = tmp_path / "observer-started"
    env = slow_observer_env(tmp_path, marker)
    with daemon(home, "--no-serve", env=env) as (proc, lines):
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert time.monotonic() < deadline, lines.lines
            assert proc.poll() is None, lines.lines
            time.sleep(0.02)
        if to_a_thread:
            tgkill(proc.pid, other_threads(proc.pid)[-1], signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        assert exit_code(proc, lines) == 0, lines.lines
        assert lines.wait_for("stopped", timeout=5), lines.lines
        said = [line.split("ledger-daemon: ", 1)[-1] for line in lines.lines]
        reconciled = next(i for i, line in enumerate(said) if line.startswith("reconcile "))
        assert said.index("stopped") > reconciled, lines.lines
    events = [json.loads(line) for line in (home / "events.jsonl").read_text().splitlines()]
    assert [e["event_type"] for e in events].count("budget.reconcile") == 1
    assert run_process(["--home", str(home), "verify-chain"], clean_env()).code == 0
