"""Run every benchmark in bench/ and print one table of figures against their limits.

    python bench/run_all.py [--quick] [--only append|verify|gate]... [--show-output]
                            [--pycache DIR] [--timeout S]

Each ``bench/bench_*.py`` runs as its own process (``--quick`` is passed through;
without it they run their default, larger sizes). Their text output is parsed;
anything that could not be parsed is listed under the table, never guessed. The
limits the ratios are taken against are measured in this same run: a bare
``flock`` + ``write`` + ``fsync`` loop on the benchmarks' disk and the single-core
Ed25519 verify rate (each script measures its own; this runner also measures both
itself, beside the scripts, as a cross-check). Goals (from the issues):

* append: ``Writer`` appends/s >= 60 % of the bare fsync loop;
* verify: lines/s >= 80 % of cores x the single-core Ed25519 verify rate;
* verify peak memory flat from the small chain to the 10x one (here: <= 1.25x);
* cold ``ledger verdict`` process p50 <= 50 ms;
* PG store: durable verdicts/s from 8 processes >= 50 % of ``pgbench -c 8 -j 2 -N`` TPS
  on the same server in the same run (beside: warm in-process p50/p99, the file store);
* PG fleet: 4 gateway hosts (``ledger proxy`` processes on one store, 8 clients each)
  durable decisions/s (a call's verdict and its record) >= 50 % of ``pgbench -N`` TPS
  on the same server in the same run, with the decisions per commit beside;
* verdict time at 1k entries vs the big chain (1M; 20k with --quick): p50 <= 1.2x;
* inclusion proof at 1M entries (100k with --quick): p50 <= 5 ms, <= 2 log2 n node reads;
  the index build beside verify-chain of the same chain; appends unchanged by the index;
* cold ``ledger verdict --model M --input-tokens N --max-output-tokens K`` p50 <= 1.1x
  cold ``ledger verdict 0.25`` (both measured in bench_calls); ``import ledger`` beside
  ``import json``; guard_client overhead around a local-server request p50 <= 3 ms;
* ``ledger serve``: cold ``ledger verdict`` and ``ledger hook pre-tool-use`` through the
  server <= 1.5x ``python -c pass`` (paired medians); 8 client processes' durable
  verdicts/s through the server >= 3x the same 8 in-process and >= 1x the bare loop;
* ``ledger proxy``, beside a bare starlette+uvicorn+httpx pass-through (the floor,
  ``floor_proxy.py``) in one interleaved run: latency added p50 <= 2x the floor's; time
  to the first streamed byte <= 1.5x the floor's; 16-client calls/s >= 50 % of the
  floor's; sealed entries per fsync >= 1 at concurrency 1 and >= 10 with 64 clients;
  RSS after 10k calls <= 1.25x after 1k; the runaway loop (8 agent loops against a $1
  cap) halts with the spend between 90 % and 100 % of the cap;
* budgets: a warm verdict with 10 budgets that all apply p50 <= 1.3x with none (100 beside);
* sessions: a warm verdict under a per-session budget that has seen 100,000 sessions
  (2,000 with --quick) p50 <= 1.2x one that has seen one, both through a resident gate
  (the gateway's batch runner) and one-shot (as a `ledger verdict` command).

The parsers of the scripts' output are in ``run_all_figures.py``; the table's rows and
its printer are in ``run_all_table.py``.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from common import bare_fsync_rate
from run_all_figures import PARSERS, Figures
from run_all_table import (
    Row,
    append_rows,
    budgets_rows,
    calls_rows,
    gate_rows,
    gateway_rows,
    merkle_rows,
    pg_fleet_rows,
    pg_rows,
    print_table,
    server_rows,
    sessions_rows,
    verify_rows,
)

BENCH = Path(__file__).resolve().parent
SCRIPTS = {
    "append": "bench_append.py",
    "verify": "bench_verify.py",
    "gate": "bench_gate.py",
    "merkle": "bench_merkle.py",
    "pg": "bench_pg.py",
    "pgfleet": "bench_pg_fleet.py",
    "calls": "bench_calls.py",
    "server": "bench_server.py",
    "gateway": "bench_gateway.py",
    "budgets": "bench_budgets.py",
    "sessions": "bench_sessions.py",
}


# --- limits measured here -------------------------------------------------------------------


def ed25519_rate(samples: int) -> float:
    """Single-core Ed25519 verifications/s on entry-sized (~600-byte) messages, best of 3."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    public = key.public_key()
    messages = [os.urandom(600) for _ in range(samples)]
    signatures = [key.sign(message) for message in messages]
    best = 0.0
    for _ in range(3):
        began = time.perf_counter()
        for message, signature in zip(messages, signatures, strict=True):
            public.verify(signature, message)
        best = max(best, samples / (time.perf_counter() - began))
    return best


# --- running the scripts ----------------------------------------------------------------------


def run_script(name: str, quick: bool, timeout: float, env: dict[str, str]) -> Figures:
    figures = Figures(name)
    argv = [sys.executable, str(BENCH / SCRIPTS[name]), *(["--quick"] if quick else [])]
    began = time.perf_counter()
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=BENCH.parent,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        figures.error = f"timed out after {timeout:.0f} s"
        partial = exc.stdout
        figures.output = partial.decode(errors="replace") if isinstance(partial, bytes) else ""
        return figures
    figures.seconds = time.perf_counter() - began
    figures.code = proc.returncode
    figures.output = proc.stdout
    if proc.returncode != 0:
        figures.error = f"exit {proc.returncode}: " + " | ".join(
            proc.stderr.strip().splitlines()[-3:]
        )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    parser.add_argument("--only", choices=sorted(SCRIPTS), action="append", default=None)
    parser.add_argument("--show-output", action="store_true", help="print each script's output")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per script")
    parser.add_argument(
        "--pycache",
        metavar="DIR",
        default=None,
        help="let the benchmarks cache compiled bytecode under DIR (PYTHONPYCACHEPREFIX), as an "
        "installed package has its .pyc files; by default the environment is left as it is",
    )
    args = parser.parse_args()
    env = dict(os.environ)
    if args.pycache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(args.pycache).resolve())
    timeout = args.timeout or (900.0 if args.quick else 7200.0)
    names = args.only or list(SCRIPTS)
    out = BENCH / "out"
    out.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    print(
        f"run_all: {'quick' if args.quick else 'full'} run of {', '.join(names)}; {cores} cores, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    own_bare = bare_fsync_rate(out, 300 if args.quick else 2000)
    own_ed = ed25519_rate(3000 if args.quick else 10000)
    print(f"limits measured here: bare flock+write+fsync {own_bare:,.0f} /s; "
          f"Ed25519 verify, one core {own_ed:,.0f} /s")  # fmt: skip
    results: dict[str, Figures] = {}
    for name in names:
        print(f"running {SCRIPTS[name]}{' --quick' if args.quick else ''} ...", flush=True)
        figures = run_script(name, args.quick, timeout, env)
        PARSERS[name](figures)
        results[name] = figures
        if args.show_output:
            print(figures.output)
    rows: list[Row] = []
    if "append" in results:
        rows += append_rows(results["append"], own_bare)
    if "verify" in results:
        rows += verify_rows(results["verify"], own_ed, cores)
    for name, build in (
        ("gate", gate_rows), ("merkle", merkle_rows), ("pg", pg_rows),
        ("pgfleet", pg_fleet_rows), ("calls", calls_rows),
        ("server", server_rows), ("gateway", gateway_rows),
        ("budgets", budgets_rows), ("sessions", sessions_rows),
    ):  # fmt: skip
        if name in results:
            rows += build(results[name])
    print()
    print_table(rows)
    print()
    for name, figures in results.items():
        state = figures.error or f"ok in {figures.seconds:.1f} s"
        print(f"{SCRIPTS[name]}: {state}")
        for item in figures.missing:
            print(f"  could not parse: {item}")
    if env.get("PYTHONDONTWRITEBYTECODE"):
        print(
            "note: PYTHONDONTWRITEBYTECODE is set and no --pycache was given, so every cold "
            "`ledger` process compiled its modules from source"
        )
    not_met = [row.figure for row in rows if row.status == "NOT met"]
    if not_met:
        print("goals not met: " + "; ".join(name.strip() for name in not_met))
    return 1 if any(f.error for f in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
