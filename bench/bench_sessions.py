"""What the number of distinct sessions a budget has seen costs a verdict (prints a report).

    python bench/bench_sessions.py            # 100,000 sessions (slow to build)
    python bench/bench_sessions.py --quick    # 2,000 sessions

Two homes with one ``per = "session"`` budget: one has seen a single session,
the other N distinct ones (each a verdict and its record, sealed in group
commits through the batch runner the gateway uses). Then warm verdicts (sealed,
fsync'd) on both, taken in turns; p50 of each, two ways: through the batch
runner of a resident gate (``ledger serve``, the gateway: the derived state
kept in memory, its file written now and then, that write's time included),
and one-shot (each verdict reads and writes the state file and the counters it
touches, as a ``ledger verdict`` command does). Goal: both verdicts at N
sessions within 1.2x of the same at a single session.

    python bench/bench_sessions.py --sessions 20000   # any number
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

BUDGET = [{"name": "per-session", "usd": 1_000_000, "period": "day", "per": "session"}]


def environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(LEDGER_BILLING_STALE_HALT_PCT="100", LEDGER_NO_SERVER="1",
               LEDGER_BUDGETS=json.dumps(BUDGET))  # fmt: skip
    return env


def seed(home: Path, env: dict[str, str], sessions: int) -> None:
    from ledger.batching import BatchRunner
    from ledger.runtime import Runtime
    from ledger.services.gate import calls

    def call(runtime: Runtime, session: str) -> None:
        document, _ = calls.verdict(runtime, "0.01", "anthropic", cycle_id=session)
        calls.record(runtime, "0.01", "anthropic", verdict_ref=document["verdict_ref"],
                     cycle_id=session)  # fmt: skip

    runner = BatchRunner(home, env, print)
    for start in range(0, sessions, 500):
        names = [f"seed-{n}" for n in range(start, min(start + 500, sessions))]

        def seed(runtime: Runtime, names: list[str] = names) -> None:
            for name in names:
                call(runtime, name)

        runner.run(seed, lambda: None)
    runner.close()


def verdict(home: Path, env: dict[str, str], session: str) -> float:
    from ledger.runtime import Runtime
    from ledger.services.gate import calls

    started = time.perf_counter()
    document, _ = calls.verdict(Runtime(home, env), "0.01", "anthropic", cycle_id=session)
    elapsed = time.perf_counter() - started
    calls.record(Runtime(home, env), "0.01", "anthropic", verdict_ref=document["verdict_ref"],
                 cycle_id=session)  # fmt: skip
    return elapsed


def resident_verdict(runner: Any, session: str) -> float:
    """One verdict through ``runner`` (a ``BatchRunner``), timed; then its record."""
    from ledger.runtime import Runtime
    from ledger.services.gate import calls

    def decide(runtime: Runtime) -> dict[str, object]:
        document, _ = calls.verdict(runtime, "0.01", "anthropic", cycle_id=session)
        return document

    started = time.perf_counter()
    document = runner.run(decide, lambda: None)
    elapsed = time.perf_counter() - started

    def settle(runtime: Runtime) -> None:
        calls.record(runtime, "0.01", "anthropic", verdict_ref=str(document["verdict_ref"]),
                     cycle_id=session)  # fmt: skip

    runner.run(settle, lambda: None)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--sessions", type=int, default=None)
    args = parser.parse_args()
    many = args.sessions or (2_000 if args.quick else 100_000)
    runs = 100 if args.quick else 300
    workdir = out_dir(args.dir) / "sessions"
    shutil.rmtree(workdir, ignore_errors=True)
    from ledger.cli import main as ledger_main

    env = environ()
    homes = {}
    for count in (1, many):
        home = workdir / f"s{count}"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            ledger_main(["--home", str(home), "init", "--daily-cap-usd", "1000000000"])
        started = time.perf_counter()
        seed(home, env, count)
        print(f"seeded {count} sessions in {time.perf_counter() - started:.1f} s")
        homes[count] = home
        for n in range(20):
            verdict(home, env, f"warm-{n % 4}")
    from ledger.batching import BatchRunner

    runners = {count: BatchRunner(home, env, print) for count, home in homes.items()}
    for count in homes:
        for n in range(20):
            resident_verdict(runners[count], f"warm-{n % 4}")
    resident: dict[int, list[float]] = {count: [] for count in homes}
    for n in range(runs * 5):
        for count in homes:
            resident[count].append(resident_verdict(runners[count], f"run-{n % 4}"))
    for runner in runners.values():
        runner.close()
    times: dict[int, list[float]] = {count: [] for count in homes}
    for n in range(runs):
        for count, home in homes.items():
            times[count].append(verdict(home, env, f"run-{n % 4}"))
    print(f"\n== warm verdicts (sealed, fsync'd), a per-session budget; load {_load()} ==")
    for label, found, each in (("resident", resident, runs * 5), ("one-shot", times, runs)):
        one = statistics.median(found[1])
        at_many = statistics.median(found[many])
        print(f"{label} ({each} each), sessions 1: verdict p50 {one * 1000:8.3f} ms")
        print(
            f"{label} ({each} each), sessions {many}: verdict p50 {at_many * 1000:8.3f} ms "
            f"({at_many / one:.3f}x one session)"
        )
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


if __name__ == "__main__":
    sys.exit(main())
