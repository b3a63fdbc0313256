"""What budgets cost a verdict (not a test; prints a report).

    python bench/bench_budgets.py            # full run
    python bench/bench_budgets.py --quick    # a small run for a smoke check

Three homes, with 0, 10 and 100 ``[[budgets]]`` that all apply to every call
(calendar and rolling periods, half of them ``per = "session"``), each already
holding a few hundred sealed verdicts and records. Warm in-process verdicts
(each sealed and fsync'd, as ``ledger verdict`` does), the homes taken in turn so
that drift in the disk's speed falls on all three alike; p50 of each. Goal: 10
budgets <= 1.3x no budgets. Then the same verdicts through the batch runner of a
resident gate (``ledger serve``, the gateway), whose derived state stays in
memory: what the budgets' own arithmetic and sealed figures cost, without the
state file a one-shot verdict reads and rewrites whole.

Homes live on the repository's disk (``bench/out``, or ``--dir``), not a tmpfs.
"""

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import out_dir

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PERIODS = ("day", "week", "month", "rolling:5h", "rolling:7d")


def budgets(count: int) -> list[dict[str, object]]:
    made: list[dict[str, object]] = []
    for n in range(count):
        table: dict[str, object] = {
            "name": f"b{n}", "usd": 1_000_000 + n, "period": PERIODS[n % len(PERIODS)],
            "match": {"agent": "bench-*"},
        }  # fmt: skip
        if n % 2:
            table["per"] = "session"
        made.append(table)
    return made


def environ(count: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(LEDGER_BILLING_STALE_HALT_PCT="100", LEDGER_NO_SERVER="1",
               LEDGER_BUDGETS=json.dumps(budgets(count)))  # fmt: skip
    return env


def verdict_and_record(home: Path, env: dict[str, str], n: int) -> float:
    from ledger.runtime import Runtime
    from ledger.services.gate import calls

    started = time.perf_counter()
    document, _ = calls.verdict(
        Runtime(home, env), "0.01", "anthropic", cycle_id=f"s{n % 20}", agent="bench-a"
    )
    elapsed = time.perf_counter() - started
    calls.record(Runtime(home, env), "0.01", "anthropic", verdict_ref=document["verdict_ref"])
    return elapsed


def resident_verdict(runner: Any, n: int) -> float:
    """One verdict through ``runner`` (a ``BatchRunner``), timed; then its record."""
    from ledger.runtime import Runtime
    from ledger.services.gate import calls

    def decide(runtime: Runtime) -> dict[str, Any]:
        document, _ = calls.verdict(
            runtime, "0.01", "anthropic", cycle_id=f"s{n % 20}", agent="bench-a"
        )
        return document

    started = time.perf_counter()
    document = runner.run(decide, lambda: None)
    elapsed = time.perf_counter() - started

    def settle(runtime: Runtime) -> None:
        calls.record(runtime, "0.01", "anthropic", verdict_ref=str(document["verdict_ref"]))

    runner.run(settle, lambda: None)
    return float(elapsed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    warmup, runs = (50, 100) if args.quick else (300, 600)
    workdir = out_dir(args.dir) / "budgets"
    shutil.rmtree(workdir, ignore_errors=True)
    from ledger.cli import main as ledger_main

    homes = {}
    for count in (0, 10, 100):
        home = workdir / f"b{count}"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            ledger_main(["--home", str(home), "init", "--daily-cap-usd", "1000000000"])
        homes[count] = (home, environ(count))
        for n in range(warmup):
            verdict_and_record(home, homes[count][1], n)
    times: dict[int, list[float]] = {count: [] for count in homes}
    for n in range(runs):
        for count, (home, env) in homes.items():
            times[count].append(verdict_and_record(home, env, n))
    from ledger.batching import BatchRunner

    runners = {count: BatchRunner(home, env, print) for count, (home, env) in homes.items()}
    resident: dict[int, list[float]] = {count: [] for count in homes}
    for n in range(warmup + runs):
        for count, runner in runners.items():
            elapsed = resident_verdict(runner, n)
            if n >= warmup:
                resident[count].append(elapsed)
    for runner in runners.values():
        runner.close()
    print(f"\n== warm in-process verdicts (sealed, fsync'd), {runs} each, all budgets apply ==")
    print(f"load average {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    base = statistics.median(times[0])
    for count, found in times.items():
        p50 = statistics.median(found)
        print(f"budgets {count:>3}: verdict p50 {p50 * 1000:8.3f} ms  ({p50 / base:.3f}x)")
    base = statistics.median(resident[0])
    for count, found in resident.items():
        p50 = statistics.median(found)
        print(f"resident gate, {count:>3} budgets: verdict p50 {p50 * 1000:8.3f} ms  "
              f"({p50 / base:.3f}x)")  # fmt: skip
    shutil.rmtree(workdir.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
