"""A budget's check and reserve are one atomic step across real ``ledger verdict`` processes."""

import json
import subprocess
import sys
import time

import pytest

from tests.conftest import clean_env
from tests.gate_helpers import CAP_ENV, chain_entries

BUDGET = json.dumps(
    [{"name": "research", "usd": 10, "period": "day", "match": {"agent": "research-*"}}]
)
WORKER = (
    "import subprocess, sys, time, pathlib\n"
    "go = pathlib.Path(sys.argv[2])\n"
    "while not go.exists(): time.sleep(0.002)\n"
    "for n in range(int(sys.argv[3])):\n"
    "    p = subprocess.run([sys.executable, '-m', 'ledger', '--home', sys.argv[1], 'verdict',\n"
    "                        '1', '--agent', f'research-{n}'], capture_output=True, text=True)\n"
    "    print(p.returncode, p.stdout.strip(), flush=True)\n"
)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("home", ["file", "postgres"], indirect=True)
def test_eight_processes_never_overshoot_one_budget(home, tmp_path, request):
    """8 processes, 3 calls of $1 each, a $10 budget: exactly 9 admitted, never a 10th."""
    processes, calls = 8, 3
    env = clean_env(**CAP_ENV, LEDGER_USD_DAILY_CAP="1000", LEDGER_BUDGETS=BUDGET,
                    LEDGER_NO_SERVER="1")  # fmt: skip
    if request.node.callspec.params["home"] == "postgres":
        env.update(request.getfixturevalue("pg_store_env"))
    go = tmp_path / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(home), str(go), str(calls)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    time.sleep(0.3)
    go.touch()
    outputs = [worker.communicate(timeout=220)[0] for worker in workers]
    decisions = [json.loads(line.split(" ", 1)[1]) for out in outputs for line in out.splitlines()]
    verdicts = [d["verdict"] for d in decisions]
    assert len(verdicts) == processes * calls
    admitted = [d for d in decisions if d["verdict"] in {"allow", "warn-90"}]
    assert len(admitted) == 9, verdicts
    assert verdicts.count("halt-100") == processes * calls - 9, verdicts
    assert all(
        d["deciding_cap"] == "budget:research" for d in decisions if d["verdict"] == "halt-100"
    )
    reserved = sum(
        entry["payload"]["reservation"]["micros"]
        for entry in chain_entries(home)
        if entry["event_type"] in {"budget.allow", "budget.warn_90"}
    )
    assert reserved == 9_000_000
