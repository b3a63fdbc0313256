"""``verify-chain`` on a fleet's PostgreSQL store, and verdicts while it runs (not a test).

    nice -n 10 python bench/bench_pg_verify.py --entries 20000 --seal 5000
    nice -n 10 python bench/bench_pg_verify.py --entries 20000 --tree /path/to/other/checkout

Starts a throw-away PostgreSQL server, builds a file home of ``--entries``
signed entries with the product's own key and sealing (``tests.helpers.bighome``,
sealed every ``--seal`` entries), moves it to the server with ``ledger store
migrate`` and writes a checkpoint. Then, with the ``ledger`` of ``--tree``
(default: this checkout; another checkout gives its figures on the same
home; every command runs in the tree's folder, so that it imports that tree):

1. wall time of ``verify-chain`` (incremental), ``--full --jobs 1`` and
   ``--full --jobs 2``;
2. verdicts from another process in a loop while ``--full --jobs 2`` runs:
   how many, how many were refused or failed, their p50 and max latency,
   beside the same loop with nothing else running; and the most advisory
   locks seen waiting (``pg_locks`` sampled every 5 ms: a writer waiting
   for the chain's lock).

Say the load (printed) beside any figure.
"""

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_pg import start_server, stop_server  # noqa: E402

from tests.helpers.bighome import START, append_entries  # noqa: E402

NOW = (START + dt.timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
_LOOP = """
import json, sys, time
from ledger.runtime import Runtime
from ledger.services.gate.gate import check_verdict
from pathlib import Path
runtime = Runtime(Path(sys.argv[1]), dict(__import__("os").environ))
stop = Path(sys.argv[2])
check_verdict(runtime, 1)  # the first one may fold the whole chain into the state
(stop.parent / "ready").touch()
times, refused = [], 0
while not stop.exists():
    began = time.perf_counter()
    outcome = check_verdict(runtime, 1)
    times.append(time.perf_counter() - began)
    refused += outcome.verdict_ref is None or str(outcome.decision.verdict.value) != "allow"
print(json.dumps({"times": times, "refused": refused}))
"""


def _env(tree: Path, store: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(store)
    env.update(PYTHONPATH=str(tree), LEDGER_NOW=NOW, LEDGER_BILLING_STALE_HALT_PCT="100",
               LEDGER_USD_RESERVATION_TTL_SECONDS="0")  # fmt: skip
    return env


def _ledger(home: Path, env: dict[str, str], *args: str) -> tuple[float, str]:
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), *args],
        capture_output=True, text=True, env=env, check=False, cwd=env["PYTHONPATH"],
    )  # fmt: skip
    took = time.perf_counter() - began
    if proc.returncode != 0:
        sys.exit(f"bench_pg_verify: {' '.join(args)}: {proc.stdout}{proc.stderr}")
    return took, proc.stdout.strip()


def _loop(
    home: Path, env: dict[str, str], seconds: float | None, during: list[str]
) -> dict[str, object]:
    import json

    stop = Path(tempfile.mkdtemp()) / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", _LOOP, str(home), str(stop)], env=env, stdout=subprocess.PIPE,
        text=True, cwd=env["PYTHONPATH"],
    )  # fmt: skip
    while not (stop.parent / "ready").exists():  # warmed up
        if proc.poll() is not None:
            sys.exit("bench_pg_verify: the verdict loop ended before it began")
        time.sleep(0.05)
    waiting = [0]
    sampling = [True]

    def sample() -> None:
        import psycopg

        with psycopg.connect(env["LEDGER_STORE_URL"], autocommit=True) as conn:
            while sampling[0]:
                row = conn.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                ).fetchone()
                waiting[0] = max(waiting[0], int(row[0]) if row else 0)
                time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    took = None
    if during:
        took, _ = _ledger(home, env, *during)
    else:
        time.sleep(seconds or 1.0)
    sampling[0] = False
    sampler.join()
    stop.touch()
    out, _ = proc.communicate(timeout=120)
    found = json.loads(out)
    times = found["times"]
    return {"verdicts": len(times), "refused": found["refused"], "took": took,
            "p50_ms": 1000 * statistics.median(times), "max_ms": 1000 * max(times),
            "advisory_waiting_max": waiting[0]}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--seal", type=int, default=5_000)
    parser.add_argument("--tree", type=Path, default=REPO)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ledger-pgv-"))
    socket_dir = start_server(root)
    try:
        store = {"LEDGER_STORE_URL": f"postgresql://postgres@/postgres?host={socket_dir}",
                 "LEDGER_STORE_SCHEMA": "bench"}  # fmt: skip
        home = root / "home"
        file_env = _env(args.tree, {})
        _ledger(home, file_env, "init", "--daily-cap-usd", "1000000000")
        append_entries(home, args.entries, {"LEDGER_NOW": NOW}, seal_every=args.seal)
        url = store["LEDGER_STORE_URL"]
        _ledger(home, file_env, "store", "migrate", "--to", url, "--schema", "bench")
        env = _env(args.tree, store)
        _ledger(home, env, "checkpoint")
        print(f"tree {args.tree}; {args.entries} entries, sealed every {args.seal} in the file")
        print(f"load before: {os.getloadavg()}")
        for label, command in (
            ("verify-chain", ["verify-chain"]),
            ("verify-chain --full --jobs 2", ["verify-chain", "--full", "--jobs", "2"]),
            ("verify-chain --full --jobs 1", ["verify-chain", "--full", "--jobs", "1"]),
            ("verify-chain --full --jobs 2", ["verify-chain", "--full", "--jobs", "2"]),
        ):
            runs = [_ledger(home, env, *command) for _ in range(args.runs)]
            each = ", ".join(f"{t:.2f}" for t, _ in runs)
            print(f"{label:32s} {min(t for t, _ in runs):7.2f} s  ({runs[0][1]}; runs {each})")
        idle = _loop(home, env, 5.0, [])
        print(f"verdicts alone (5 s):           {idle}")
        busy = _loop(home, env, None, ["verify-chain", "--full", "--jobs", "2"])
        print(f"verdicts during --full --jobs 2: {busy}")
        print(f"load after: {os.getloadavg()}")
    finally:
        stop_server(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
