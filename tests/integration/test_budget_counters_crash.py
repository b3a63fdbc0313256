"""Per-session counters survive a writer SIGKILLed at random moments.

A child process seals verdicts and records for many sessions under a
``per = "session"`` budget (one-shot, or through the batch runner the
gateway uses), the derived index written on every save, and is killed at a
random moment, round after round. After each kill the counters the gate reads
(the state file, the index, caught up from the chain) are exactly those a fold
of the chain from scratch gives: nothing lost, nothing counted twice, never
``counter_inconsistent``. Idempotency keys written with them are honoured
after every kill, and the chain verifies.
"""

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ledger.runtime import Runtime
from ledger.services.gate import calls
from ledger.services.gate.budget_views import budget_rows
from tests.conftest import REPO, clean_env
from tests.gate_helpers import env_at

BUDGET = [{"name": "per-session", "usd": 1000, "period": "day", "per": "session"}]

WORKER = """
import itertools, sys
from pathlib import Path
from ledger.batching import BatchRunner
from ledger.runtime import Runtime
from ledger.services.gate import calls
import os

home, seed, resident = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
env = dict(os.environ)

def call(runtime, n):
    session = f"s-{(n * 7919 + seed) % 60}"
    document, _ = calls.verdict(runtime, "0.01", "anthropic", cycle_id=session)
    calls.record(runtime, "0.02", "anthropic", verdict_ref=document["verdict_ref"],
                 cycle_id=session, idempotency_key_value=f"k-{seed}-{n}")

runner = BatchRunner(home, env, lambda _line: None) if resident else None
for n in itertools.count():
    if runner is not None:
        runner.run(lambda runtime, n=n: [call(runtime, n * 5 + k) for k in range(5)], lambda: None)
    else:
        call(Runtime(home, env), n)
    print(n, flush=True)
"""


def _env() -> dict[str, str]:
    env: dict[str, str] = env_at(
        0, LEDGER_BUDGETS=json.dumps(BUDGET), LEDGER_USD_DAILY_CAP="1000000"
    )
    return env


def _rows(home: Path) -> tuple[Any, list[tuple[Any, int, int]]]:
    rows = budget_rows(Runtime(home, _env()))
    figures = sorted(
        (r["per_value"], r["used_micros"], r["reserved_micros"]) for r in rows["budgets"]
    )
    return rows["diagnostic"], figures


def _kill_after(home: Path, seed: int, resident: bool, delay: float) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(home), str(seed), "1" if resident else "0"],
        cwd=REPO, env=clean_env(**_env()), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first, proc.stderr.read() if proc.stderr else ""
        time.sleep(delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()


def test_counters_after_each_kill_equal_a_fold_from_scratch(home: Path, tmp_path: Path):
    chooser = random.Random(4243)
    for round_number in range(12):
        _kill_after(home, round_number, round_number % 2 == 1, chooser.uniform(0.05, 0.6))
        diagnostic, stored = _rows(home)
        assert diagnostic is None, diagnostic
        fresh_home = tmp_path / f"fresh-{round_number}"
        shutil.copytree(home, fresh_home)
        shutil.rmtree(fresh_home / "state")
        fresh_diagnostic, fresh = _rows(fresh_home)
        assert fresh_diagnostic is None, fresh_diagnostic
        assert stored == fresh
        _retries_count_once(home, round_number)
    assert stored, "nothing was counted"
    assert not (home / "state" / "counters").exists()
    assert (home / "state" / "index.sqlite3").exists()
    verified = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), "verify-chain"],
        cwd=REPO, env=clean_env(**_env()), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stderr


def _retries_count_once(home: Path, seed: int) -> None:
    """Every key the killed writer used, tried again: each is a duplicate, none counted twice."""
    runtime = Runtime(home, _env())
    chain = _whole_lines(home)
    keys = [json.loads(line)["payload"].get("idempotency_key") for line in chain]
    sealed = [key for key in keys if key and key.startswith(f"k-{seed}-")]
    before = len(chain)
    for key in sealed:
        document, _ = calls.record(
            runtime, "0.02", "anthropic", cycle_id="retry", idempotency_key_value=key
        )
        assert document["duplicate"] is True, key
    assert len(_whole_lines(home)) == before


def _whole_lines(home: Path) -> list[str]:
    """The chain's complete lines: a kill mid-append leaves a torn tail the next writer cuts."""
    return (home / "events.jsonl").read_text().split("\n")[:-1]
