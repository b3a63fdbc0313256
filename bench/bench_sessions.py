"""What the number of distinct sessions a budget has seen costs a verdict (prints a report).

    python bench/bench_sessions.py            # 100,000 sessions (slow to build)
    python bench/bench_sessions.py --quick    # 2,000 sessions

Two homes with one ``per = "session"`` budget: one has seen a single session,
the other N distinct ones (each a verdict and its record, sealed in group
commits through the batch runner the gateway uses). Then warm in-process
verdicts (sealed, fsync'd) on both, taken in turns; p50 of each. Goal: the
verdict at N sessions within 1.2x of the one at a single session.
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


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    many = 2_000 if args.quick else 100_000
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
    times: dict[int, list[float]] = {count: [] for count in homes}
    for n in range(runs):
        for count, home in homes.items():
            times[count].append(verdict(home, env, f"run-{n % 4}"))
    one = statistics.median(times[1])
    at_many = statistics.median(times[many])
    print(f"\n== warm in-process verdicts (sealed, fsync'd), {runs} each, a per-session budget ==")
    print(f"sessions 1: verdict p50 {one * 1000:8.3f} ms")
    print(
        f"sessions {many}: verdict p50 {at_many * 1000:8.3f} ms ({at_many / one:.3f}x one session)"
    )
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
