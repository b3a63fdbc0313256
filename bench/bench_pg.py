"""Figures for a fleet's PostgreSQL store (not a test, prints a report).

    python bench/bench_pg.py            # 10 s windows
    python bench/bench_pg.py --quick    # 3 s windows

Starts a throw-away PostgreSQL server (Unix socket only, ``fsync=on``), then in
the same run:

1. ``pgbench -c 8 -j 2 -T S -N`` TPS on that server: the limit;
2. durable verdicts/s from 8 processes through the PG store (each verdict one
   committed transaction: advisory lock, head, state, insert, state update);
3. p50/p99 of one verdict in-process with a warm connection;
4. the same 8-process figure on the file store (``events.jsonl`` on this disk);
5. ``pgbench -c 1 -N``: one client, one commit at a time, which is what the
   advisory lock makes the writers do (the lock is held until the commit's WAL
   flush is done, so their commits are never grouped).

Every verdict is admitted (the cap is far away), so each one reserves and
writes; the goal is PG verdicts/s >= 50 % of pgbench's TPS.
"""

import argparse
import multiprocessing
import os
import pwd
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# The real clock, and reservations that lapse at once: each verdict still reserves and
# writes, but the folded state stays the same size however many verdicts run.
ENV = {"LEDGER_BILLING_STALE_HALT_PCT": "100", "LEDGER_USD_RESERVATION_TTL_SECONDS": "0"}


def pg_bin() -> Path:
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not candidates:
        sys.exit("bench_pg: no PostgreSQL binaries (install Debian's postgresql)")
    return candidates[-1].parent


def as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def start_server(root: Path, *, statement_stats: bool = False) -> str:
    bin_dir = pg_bin()
    if os.geteuid() == 0:
        record = pwd.getpwnam("postgres")
        os.chown(root, record.pw_uid, record.pw_gid)
    data = root / "data"
    subprocess.run(
        as_server_user([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"]),
        check=True, capture_output=True,
    )  # fmt: skip
    options = f"-k {root} -c listen_addresses='' -c fsync=on -c max_connections=100"
    if statement_stats:  # what each statement cost (the fleet bench's lock waits)
        options += " -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
    subprocess.run(
        as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"]),
        check=True, capture_output=True,
    )  # fmt: skip
    return str(root)


def stop_server(root: Path) -> None:
    subprocess.run(
        as_server_user([str(pg_bin() / "pg_ctl"), "-D", str(root / "data"), "-m", "fast", "-w", "stop"]),
        check=False, capture_output=True,
    )  # fmt: skip


def pgbench(socket_dir: str, seconds: int, clients: int = 8) -> float:
    tool = shutil.which("pgbench") or str(pg_bin() / "pgbench")
    base = [tool, "-h", socket_dir, "-U", "postgres"]
    subprocess.run([*base, "-i", "-s", "8", "-q", "postgres"], check=True, capture_output=True)
    run = subprocess.run(
        [*base, "-c", str(clients), "-j", str(min(2, clients)), "-T", str(seconds), "-N", "postgres"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    match = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", run.stdout)
    if match is None:
        match = re.search(r"tps = ([0-9.]+)", run.stdout)
    if match is None:
        sys.exit(f"bench_pg: no tps in pgbench's output:\n{run.stdout}")
    return float(match.group(1))


def init_home(home: Path, store_env: dict[str, str]) -> None:
    import contextlib
    import io

    from ledger.cli import main

    os.environ.update(store_env)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            main(["--home", str(home), "init", "--daily-cap-usd", "1000000000"])
    except SystemExit as exc:
        if exc.code:
            raise
    finally:
        for key in store_env:
            os.environ.pop(key, None)


def worker(home: str, seconds: float, go: float) -> int:
    from ledger.runtime import Runtime
    from ledger.services.gate.gate import check_verdict

    runtime = Runtime(Path(home), dict(ENV))
    check_verdict(runtime, 1)  # connect and warm up before the window
    while time.monotonic() < go:
        time.sleep(0.001)
    done = 0
    end = go + seconds
    while time.monotonic() < end:
        outcome = check_verdict(runtime, 1)
        if outcome.verdict_ref is None:
            sys.exit(f"bench_pg: a verdict was not recorded: {outcome.recording_error}")
        done += 1
    return done


def parallel_rate(home: Path, processes: int, seconds: float) -> float:
    context = multiprocessing.get_context("spawn")
    with context.Pool(processes) as pool:
        go = time.monotonic() + 3.0
        jobs = [pool.apply_async(worker, (str(home), seconds, go)) for _ in range(processes)]
        total = sum(job.get(timeout=seconds + 120) for job in jobs)
    return total / seconds


def latencies(home: Path, count: int) -> list[float]:
    from ledger.runtime import Runtime
    from ledger.services.gate.gate import check_verdict

    runtime = Runtime(home, dict(ENV))
    for _ in range(20):
        check_verdict(runtime, 1)
    times = []
    for _ in range(count):
        started = time.perf_counter()
        check_verdict(runtime, 1)
        times.append(time.perf_counter() - started)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seconds = 3 if args.quick else 10
    root = Path(tempfile.mkdtemp(prefix="ledger-pgbench-"))
    work = Path(tempfile.mkdtemp(prefix="ledger-bench-pg-", dir=REPO / "bench" / "out"))
    try:
        socket_dir = start_server(root)
        url = f"postgresql://postgres@/postgres?host={socket_dir}"
        print(f"server: PostgreSQL at {socket_dir} (Unix socket, fsync=on); {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
        tps = pgbench(socket_dir, seconds)
        print(f"pgbench -c 8 -j 2 -T {seconds} -N  : {tps:,.1f} tps")
        serial = pgbench(socket_dir, seconds, clients=1)
        # One client commits one transaction at a time, as the advisory lock makes the
        # writers do: the ceiling of any one-writer-at-a-time design on this disk.
        print(f"pgbench -c 1 -j 1 -T {seconds} -N  : {serial:,.1f} tps (one writer at a time)")
        pg_home = work / "pg-home"
        init_home(pg_home, {"LEDGER_STORE_URL": url, "LEDGER_STORE_SCHEMA": "bench"})
        rate = parallel_rate(pg_home, 8, seconds)
        print(
            f"pg store, 8 processes           : {rate:,.1f} verdicts/s ({100 * rate / tps:.1f} % of pgbench)"
        )
        times = latencies(pg_home, 300 if args.quick else 2000)
        print(f"pg store, one verdict in-process : p50 {1000 * statistics.median(times):.3f} ms "
              f"p99 {1000 * pct(times, 0.99):.3f} ms (warm connection)")  # fmt: skip
        file_home = work / "file-home"
        init_home(file_home, {})
        file_rate = parallel_rate(file_home, 8, seconds)
        print(f"file store, 8 processes         : {file_rate:,.1f} verdicts/s")
    finally:
        from ledger.edges.postgres.connection import close_all

        close_all()
        stop_server(root)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
