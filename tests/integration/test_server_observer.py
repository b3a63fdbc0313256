"""A served verdict that runs the UsageObserver lets other writers in meanwhile.

The observer is a real script that waits until the test lets it finish, so the
in-process writer provably runs while the observer does; nothing is timed.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.server_helpers import (
    NOW,
    assert_verifies,
    entries,
    init_home,
    ledger,
    no_server_env,
    served_env,
    start_server,
)

pytestmark = pytest.mark.timeout(180)

SLOW_OBSERVER = """\
import json, pathlib, sys, time
started, release = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
started.write_text("running")
deadline = time.monotonic() + 60
while not release.exists() and time.monotonic() < deadline:
    time.sleep(0.02)
print(json.dumps({"usd_used": 80, "billing_ts": sys.argv[3]}))
"""


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, "the verdict ended before its observer ran"
        assert time.monotonic() < deadline, "the observer never started"
        time.sleep(0.02)


def test_an_in_process_record_is_sealed_while_a_served_verdicts_observer_runs(tmp_path: Path):
    """Above stale_halt_pct with no fresh reading, the served verdict runs the observer;
    a record with a 1 s lock timeout meanwhile is sealed (it used to exit 75)."""
    home = init_home(tmp_path / "home", cap="100")
    spent = ledger(home, "record", "80", "--provider", "openai", env=no_server_env())
    assert spent.code == 0, spent.stderr
    script = tmp_path / "slow_observer.py"
    script.write_text(SLOW_OBSERVER)
    started, release = tmp_path / "started", tmp_path / "release"
    observer = json.dumps([sys.executable, str(script), str(started), str(release), NOW])
    server = start_server(home)
    try:
        verdict = subprocess.Popen(
            [sys.executable, "-m", "ledger", "--home", str(home), "verdict", "1"],
            env=served_env(LEDGER_OBSERVER_COMMAND=observer, LEDGER_OBSERVER_TIMEOUT_SECONDS="90"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            _wait_for(started, verdict)
            record = ledger(
                home, "record", "0.5", "--provider", "openai", "--cycle-id", "beside",
                env=no_server_env(LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS="1"),
            )  # fmt: skip
        finally:
            release.write_text("go")
            out, err = verdict.communicate(timeout=120)
        assert record.code == 0, record.stderr
        assert json.loads(out)["verdict"], err
    finally:
        assert server.stop() == 0
    assert server.served_count() == 1  # the verdict was answered by the server
    kinds = [e["event_type"] for e in entries(home)]
    assert kinds.count("budget.record_call") == 2
    assert kinds.count("budget.observation") == 1
    assert sum(kind.startswith("budget.") and "record" not in kind for kind in kinds) == 2
    assert assert_verifies(home) == len(kinds)
