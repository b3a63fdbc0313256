"""Check and reserve are one atomic step across real processes (SPEC §4, last line).

Many processes race for the last dollars of a cap; exactly as many calls are
admitted as fit, no process ever sees an inconsistent counter, and the chain
that results verifies with one entry per verdict.
"""

import json
import multiprocessing
import subprocess
import sys
import time
from collections import Counter

import pytest

from tests.conftest import clean_env, run_process
from tests.gate_helpers import CAP_ENV, chain_entries, merge_counts, verdict_worker


@pytest.mark.timeout(120)
def test_eight_processes_never_overspend_a_100_dollar_cap(home, tmp_path):
    processes, calls = 8, 200
    env = clean_env(**CAP_ENV)
    go = tmp_path / "go"
    context = multiprocessing.get_context("spawn")
    with context.Pool(processes) as pool:
        pending = [
            pool.apply_async(verdict_worker, (str(home), env, calls, str(go)))
            for _ in range(processes)
        ]
        time.sleep(0.5)  # let every worker import and wait at the line
        go.touch()
        parts = [job.get(timeout=100) for job in pending]
    totals = merge_counts(parts)
    admitted = totals.get("allow", 0) + totals.get("warn-90", 0)
    assert admitted == 99, totals
    assert totals.get("warn-90", 0) == 10, totals
    assert totals.get("halt-100", 0) == processes * calls - 99, totals
    assert set(totals) == {"allow", "warn-90", "halt-100"}, totals  # no uncertainty at all
    # the race was real: more than one process was admitted
    assert sum(1 for part in parts if part.get("allow", 0) + part.get("warn-90", 0)) > 1

    entries = chain_entries(home)
    assert len(entries) == processes * calls
    kinds = Counter(entry["event_type"] for entry in entries)
    assert kinds == {"budget.allow": 89, "budget.warn_90": 10, "budget.halt_100": 1501}
    reserved = sum(
        e["payload"]["reservation"]["micros"] for e in entries if e["payload"]["reservation"]
    )
    assert reserved == 99_000_000
    times = [entry["ts_utc"] for entry in entries]
    assert times == sorted(times)
    verify = run_process(["--home", str(home), "verify-chain"], env=clean_env())
    assert verify.code == 0, verify
    assert verify.stdout.strip() == f"OK {processes * calls} entries"
    usage = run_process(["--home", str(home), "usage"], env=clean_env(**CAP_ENV))
    assert usage.json()["usd_reserved_micros"] == 99_000_000
    assert usage.json()["usd_remaining"] == 1


@pytest.mark.timeout(120)
def test_four_cli_processes_share_a_10_dollar_cap(home, tmp_path):
    processes, calls = 4, 15  # 60 real processes for 9 admissions: the race is real
    env = clean_env(**CAP_ENV, LEDGER_USD_DAILY_CAP="10")
    go = tmp_path / "go"
    script = (
        "import subprocess, sys, time, pathlib\n"
        "go = pathlib.Path(sys.argv[2])\n"
        "while not go.exists(): time.sleep(0.002)\n"
        "for _ in range(int(sys.argv[3])):\n"
        "    p = subprocess.run([sys.executable, '-m', 'ledger', '--home', sys.argv[1],\n"
        "                        'verdict', '1'], capture_output=True, text=True)\n"
        "    print(p.returncode, p.stdout.strip(), flush=True)\n"
    )
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(home), str(go), str(calls)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    go.touch()
    outputs = [worker.communicate(timeout=110)[0] for worker in workers]
    verdicts: Counter[str] = Counter()
    per_worker = []
    for output in outputs:
        admitted = 0
        for line in output.splitlines():
            code, document = line.split(" ", 1)
            decision = json.loads(document)["verdict"]
            verdicts[decision] += 1
            assert int(code) == (0 if decision in {"allow", "warn-90"} else 1)
            admitted += decision in {"allow", "warn-90"}
        per_worker.append(admitted)
    assert sum(verdicts.values()) == processes * calls
    assert verdicts["allow"] + verdicts["warn-90"] == 9, verdicts
    assert verdicts["halt-100"] == processes * calls - 9, verdicts
    assert set(verdicts) <= {"allow", "warn-90", "halt-100"}, verdicts
    verify = run_process(["--home", str(home), "verify-chain"], env=clean_env())
    assert verify.code == 0, verify
    assert verify.stdout.strip() == f"OK {processes * calls} entries"
