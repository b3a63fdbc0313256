"""Per-session counters survive a writer SIGKILLed at random moments.

A child process seals verdicts and records for many sessions under a
``per = "session"`` budget (one-shot, or through the batch runner the
gateway uses), its counter files rewritten every few saves, and is killed at
a random moment, round after round. After
each kill the counters the gate reads (the state file, its buckets, caught up
from the chain) are exactly those a fold of the chain from scratch gives:
nothing lost, nothing counted twice, never ``counter_inconsistent``.
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
from ledger.services.gate.budget_views import budget_rows
from tests.conftest import REPO, clean_env
from tests.gate_helpers import env_at

BUDGET = [{"name": "per-session", "usd": 1000, "period": "day", "per": "session"}]

WORKER = """
import itertools, sys
from pathlib import Path
from ledger.batching import BatchRunner
from ledger.edges.files import counterbuckets
from ledger.runtime import Runtime
from ledger.services.gate import calls
import os

counterbuckets.COMPACT_FLOOR = 600  # files rewritten often, so kills land inside rewrites too

home, seed, resident = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
env = dict(os.environ)

def call(runtime, n):
    session = f"s-{(n * 7919 + seed) % 60}"
    document, _ = calls.verdict(runtime, "0.01", "anthropic", cycle_id=session)
    calls.record(runtime, "0.02", "anthropic", verdict_ref=document["verdict_ref"],
                 cycle_id=session)

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
    assert stored, "nothing was counted"
    generations = [int(path.name.split(".")[1]) for path in (home / "state" / "counters").iterdir()]
    assert max(generations) > 1, "no counter file was ever rewritten"
