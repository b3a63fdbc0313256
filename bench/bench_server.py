"""Figures for `ledger serve`: cold per-call processes and group commit (not a test).

    python bench/bench_server.py            # full run
    python bench/bench_server.py --quick    # a small run for a smoke check

1. cold processes, paired: each round runs ``python -c pass``, ``ledger verdict``
   through the server and ``ledger hook pre-tool-use`` through the server, one
   after another, from the same venv; medians of the times and of the per-round
   ratios. ``ledger`` is the installed launcher (``bin/ledger``: the front door
   and nothing before it). Beside them, the server's share: the same two
   requests' round trips from a warm client process (build, connect, reply).
2. throughput: 8 client processes start together and each makes ``--per-client``
   durable verdicts in a loop, through the server (one request per connection)
   and then, on a fresh home, in-process (``LEDGER_NO_SERVER=1``: one lock and
   one fsync per verdict); the bare flock + write + fsync loop of one process on
   the same disk is the limit beside them. The server's mean batch (requests
   per group commit, so per fsync) is taken from its stop line.
3. the same 8 clients as hooks run them: every verdict its own ``ledger verdict``
   process, through the server and in-process.
"""

import argparse
import io
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from common import bare_fsync_rate, ledger_script  # noqa: E402 - after the path is set

CAP_USD = "1000000000"
BASE_ENV = {"LEDGER_BILLING_STALE_HALT_PCT": "100"}
# Throughput runs many verdicts and no records: with the default TTL their open
# reservations pile up and every verdict re-serializes all of them (derived state
# grows by ~150 bytes a reservation), in both modes alike. With TTL 0 a
# reservation lapses at once, as if each call were settled, and the figures
# measure the gate and its commits rather than the state's growth.
THROUGHPUT_ENV = {"LEDGER_USD_RESERVATION_TTL_SECONDS": "0"}
HOOK_INPUT = (REPO / "tests" / "fixtures" / "hooks" / "pre_tool_use_bash.json").read_bytes()
CLIENTS = 8


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(BASE_ENV)
    env.update(extra)
    return env


def init_home(path: Path) -> None:
    subprocess.run(
        [ledger_script(), "--home", str(path), "init", "--daily-cap-usd", CAP_USD],
        capture_output=True, env=clean_env(), check=True,
    )  # fmt: skip


def start_server(home: Path) -> subprocess.Popen[bytes]:
    log = (home.parent / f"{home.name}-serve.log").open("wb")
    proc = subprocess.Popen(
        [ledger_script(), "--home", str(home), "serve"],
        env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    log.close()
    import socket

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_UNIX) as probe:
            if probe.connect_ex(str(home / "gate.sock")) == 0:
                return proc
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("bench_server: the server did not start")


def stop_server(proc: subprocess.Popen[bytes], home: Path | None = None) -> float | None:
    """Stop the server; the mean number of requests per batch, when ``home`` is given."""
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    if home is None:
        return None
    log = (home.parent / f"{home.name}-serve.log").read_text()
    match = re.search(r"stopped after (\d+) requests in (\d+) batches", log)
    return int(match.group(1)) / max(1, int(match.group(2))) if match else None


def timed(argv: list[str], env: dict[str, str], stdin: bytes | None = None) -> float:
    began = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"bench_server: {argv[-2:]} exited {proc.returncode}: {proc.stderr!r}")
    return elapsed


# --- 1. cold processes -----------------------------------------------------------------------


def cold(workdir: Path, runs: int) -> None:
    print(f"\n== 1. cold per-call processes through the server ({runs} paired rounds) ==")
    home = workdir / "cold"
    init_home(home)
    server = start_server(home)
    env = clean_env()
    script = ledger_script()
    commands = {
        "python -c pass": ([sys.executable, "-c", "pass"], None),
        "ledger verdict": ([script, "--home", str(home), "verdict", "0.01"], None),
        "ledger hook pre-tool-use": ([script, "--home", str(home), "hook", "pre-tool-use"],
                                     HOOK_INPUT),
    }  # fmt: skip
    try:
        for argv, stdin in commands.values():  # warm the page cache
            timed(argv, env, stdin)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, (argv, stdin) in commands.items():
                times[name].append(timed(argv, env, stdin))
        trips = {
            "verdict": round_trips(home, ["verdict", "0.01"], None, runs),
            "hook pre-tool-use": round_trips(home, ["hook", "pre-tool-use"], HOOK_INPUT, runs),
        }
    finally:
        stop_server(server)
    floor = times["python -c pass"]
    for name, values in times.items():
        ratios = [value / base for value, base in zip(values, floor, strict=True)]
        print(
            f"  {name:<36} p50 {statistics.median(values) * 1000:7.2f} ms"
            f"   paired ratio p50 {statistics.median(ratios):.2f}x"
        )
    for name, values in trips.items():
        print(
            f"  round trip, warm client, {name:<18} p50 {statistics.median(values) * 1000:7.2f} ms"
        )


def round_trips(home: Path, args: list[str], stdin: bytes | None, runs: int) -> list[float]:
    """Seconds per request from this (warm) process: what a cold client waits for the server."""
    from ledger.cli.client import _connect, build_request, exchange

    times = []
    for _ in range(runs):
        began = time.perf_counter()
        request = build_request(["--home", str(home), *args])
        sock = _connect(str(home / "gate.sock")) if request else None
        if request is None or sock is None:
            raise SystemExit("bench_server: no server to time the round trip against")
        request.stdin = stdin
        if exchange(sock, request.encode(), 60).code != 0:
            raise SystemExit(f"bench_server: {args} through the server did not exit 0")
        times.append(time.perf_counter() - began)
    return times


# --- 2. throughput ---------------------------------------------------------------------------


def worker(home: str, mode: str, count: int, go: str) -> int:
    """One client process: ``count`` verdicts, through the server or in-process."""
    while not Path(go).exists():
        time.sleep(0.0005)
    if mode.startswith("spawn-"):
        argv = [ledger_script(), "--home", home, "verdict", "0.01"]
        for _ in range(count):
            if subprocess.run(argv, capture_output=True, check=False).returncode != 0:
                return 4
        return 0
    if mode == "server":
        from ledger.cli.client import _connect, build_request, exchange

        for _ in range(count):
            request = build_request(["--home", home, "verdict", "0.01"])
            sock = _connect(str(Path(home) / "gate.sock")) if request else None
            if request is None or sock is None:
                return 3
            if exchange(sock, request.encode(), 60).code != 0:
                return 4
        return 0
    from ledger.cli.percall.parser import build_parser, run

    parser = build_parser()
    real = sys.stdout
    for _ in range(count):
        sys.stdout = io.StringIO()
        try:
            code = run(home, ["verdict", "0.01"], parser=parser)
        finally:
            sys.stdout = real
        if code != 0:
            return 4
    return 0


def aggregate_rate(home: Path, mode: str, per_client: int) -> float:
    go = home.parent / f"go-{mode}"
    in_process = mode in {"inproc", "spawn-inproc"}
    env = clean_env(**THROUGHPUT_ENV, **({"LEDGER_NO_SERVER": "1"} if in_process else {}))
    argv = [sys.executable, __file__, "--worker", str(home), mode, str(per_client), str(go)]
    procs = [subprocess.Popen(argv, env=env) for _ in range(CLIENTS)]
    time.sleep(2.0)  # let every worker import and wait at the barrier
    began = time.perf_counter()
    go.touch()
    codes = [proc.wait() for proc in procs]
    elapsed = time.perf_counter() - began
    if any(codes):
        raise SystemExit(f"bench_server: {mode} workers exited {codes}")
    return CLIENTS * per_client / elapsed


def throughput(workdir: Path, per_client: int) -> None:
    print(f"\n== 2. {CLIENTS} concurrent client processes x {per_client} durable verdicts ==")
    served_home, inproc_home = workdir / "served", workdir / "inproc"
    init_home(served_home)
    init_home(inproc_home)
    server = start_server(served_home)
    try:
        served = aggregate_rate(served_home, "server", per_client)
    finally:
        batch = stop_server(server, served_home)
    inproc = aggregate_rate(inproc_home, "inproc", per_client)
    bare = bare_fsync_rate(workdir, max(500, CLIENTS * per_client))
    print(
        f"  through the server            : {served:8,.0f} verdicts/s"
        f"   (mean batch {batch or 0:.1f} requests per fsync)"
    )
    print(f"  in-process (LEDGER_NO_SERVER) : {inproc:8,.0f} verdicts/s")
    print(f"  bare flock+write+fsync loop   : {bare:8,.0f} appends/s")
    print(f"  ratio server/in-process       : {served / inproc:.2f}x")
    print(f"  ratio server/bare loop        : {served / bare:.2f}x")


def per_call_processes(workdir: Path, per_client: int) -> None:
    print(
        f"\n== 3. {CLIENTS} clients, each verdict its own `ledger verdict` process "
        f"({per_client} per client) =="
    )
    served_home, inproc_home = workdir / "spawn-served", workdir / "spawn-inproc"
    init_home(served_home)
    init_home(inproc_home)
    server = start_server(served_home)
    try:
        served = aggregate_rate(served_home, "spawn-server", per_client)
    finally:
        stop_server(server)
    inproc = aggregate_rate(inproc_home, "spawn-inproc", per_client)
    print(f"  per-call processes, server    : {served:8,.0f} verdicts/s")
    print(f"  per-call processes, in-process: {inproc:8,.0f} verdicts/s")
    print(f"  ratio per-call server/in-process: {served / inproc:.2f}x")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--worker"]:
        return worker(args[1], args[2], int(args[3]), args[4])
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, help="paired cold rounds")
    parser.add_argument("--per-client", type=int, help="verdicts per client process")
    parser.add_argument("--only", choices=("cold", "throughput", "processes"), action="append")
    parser.add_argument("--dir", help="scratch directory (default bench/out)")
    options = parser.parse_args(args)
    runs = options.runs or (15 if options.quick else 40)
    per_client = options.per_client or (25 if options.quick else 100)
    base = Path(options.dir) if options.dir else REPO / "bench" / "out"
    base.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(dir=base))
    sections = set(options.only or ("cold", "throughput", "processes"))
    print(f"bench_server: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    try:
        if "cold" in sections:
            cold(workdir, runs)
        if "throughput" in sections:
            throughput(workdir, per_client)
        if "processes" in sections:
            per_call_processes(workdir, max(5, per_client // 5))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
