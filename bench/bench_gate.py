"""Figures for the USD gate's per-call path (not a test; prints a report).

    python bench/bench_gate.py            # full run (1,000,000-entry chain)
    python bench/bench_gate.py --quick    # a small run for a smoke check
    python bench/bench_gate.py --entries 200000 --runs 30 --verdicts 200

1. cold ``ledger verdict`` process wall time (the installed console script),
   p50/p90 over ``--runs`` runs, and ``python -X importtime`` top contributors;
2. import time of the modules on the verdict path, each in a fresh interpreter;
3. in-process verdict + durable append rate (``check_verdict``, fsync each);
4. verdict time at 1,000 entries vs ``--entries`` entries (goal: ratio ≤ 1.2).

The big chain is built fast: entry bytes come from a canonical template
(RFC 8785 output of the product's own ``canonical_bytes``) with only
``prev_hash``, ``ts_utc`` and ``verdict_ref`` spliced in, and signatures are made
in parallel with the home's own key. Derived state is then built once, by
default the way the product does it when none exists (a verdict that verifies
the whole chain), or with ``--state fold`` by folding the entries directly.

Section 4 is in ``gate_scale.py``; what the sections share is in ``gate_common.py``.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ledger_script
from gate_common import BASE_ENV_EXTRA, check, clean_env, fmt_ms, init_home, pct
from gate_scale import scale

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

VERDICT_PATH_MODULES = (
    "ledger.cli",
    "ledger.cli.percall.parser",
    "ledger.cli.percall.budget",
    "ledger.runtime",
    "ledger.services.gate.gate",
    "ledger.services.chain.state",
    "ledger.services.chain.writer",
    "ledger.core.verdict",
    "ledger.core.spend",
    "ledger.core.seal",
    "ledger.core.signing",
    "ledger.edges.files.chainfile",
    "ledger.edges.files.statefile",
    "ledger.edges.files.keyfiles",
)


# --- 1. cold process -------------------------------------------------------------------


def cold_process(workdir: Path, runs: int) -> None:
    print(f"\n== 1. cold `ledger verdict` process ({runs} runs) ==")
    home = workdir / "cold"
    init_home(home)
    env = clean_env(**BASE_ENV_EXTRA)
    script = ledger_script()
    argv = [script, "--home", str(home), "verdict", "0.01"]
    for _ in range(3):  # warm the page cache and the state file
        subprocess.run(argv, capture_output=True, env=env, check=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, env=env, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"verdict failed: {proc.stderr!r}")
    baseline = []
    for _ in range(max(5, runs // 3)):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
        baseline.append(time.perf_counter() - start)
    print(f"  script: {script}")
    print(
        f"  ledger verdict   p50 {fmt_ms(pct(times, 0.5))}   p90 {fmt_ms(pct(times, 0.9))}"
        f"   min {fmt_ms(min(times))}   max {fmt_ms(max(times))}"
    )
    print(f"  python -c pass   p50 {fmt_ms(pct(baseline, 0.5))}   (interpreter start-up floor)")

    traced = subprocess.run(
        [sys.executable, "-X", "importtime", script, "--home", str(home), "verdict", "0.01"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    rows = parse_importtime(traced.stderr)
    total = sum(self_us for _name, self_us, _cum in rows)
    print(f"  python -X importtime: {len(rows)} modules, {total / 1000:.1f} ms of self time")
    print("  top contributors by self time:")
    for name, self_us, cum_us in sorted(rows, key=lambda r: -r[1])[:12]:
        print(f"    {self_us / 1000:7.2f} ms self  {cum_us / 1000:7.2f} ms cum  {name}")
    print("  top-level imports by cumulative time:")
    top = [row for row in rows if not row[0].startswith(" ")]
    for name, _self, cum_us in sorted(top, key=lambda r: -r[2])[:8]:
        print(f"    {cum_us / 1000:7.2f} ms cum  {name.strip()}")
    heavy = {"typer", "jsonschema", "apscheduler", "click", "rich"}
    loaded = {name.strip().split(".")[0] for name, _s, _c in rows} & heavy
    print(f"  heavy packages imported on the verdict path: {sorted(loaded) or 'none'}")


def parse_importtime(stderr: str) -> list[tuple[str, int, int]]:
    """``(name, self_us, cumulative_us)`` rows; nested imports keep their indentation."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_part, cum_part, name = line[len("import time:") :].split("|", 2)
        rows.append((name.rstrip()[1:], int(self_part), int(cum_part)))
    return rows


# --- 2. import time of verdict-path modules ------------------------------------------


def import_times(repeats: int) -> None:
    print(
        f"\n== 2. import time of verdict-path modules (fresh interpreter, median of {repeats}) =="
    )
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "__import__(sys.argv[1])\n"
        "print(time.perf_counter() - t)\n"
    )
    for module in VERDICT_PATH_MODULES:
        samples = []
        for _ in range(repeats):
            out = subprocess.run(
                [sys.executable, "-c", code, module],
                capture_output=True,
                text=True,
                env=clean_env(),
                check=True,
            ).stdout
            samples.append(float(out))
        print(f"  {fmt_ms(statistics.median(samples))}  {module}")


# --- 3. in-process rate ------------------------------------------------------------------


def inprocess_rate(workdir: Path, calls: int) -> None:
    from ledger.runtime import Runtime
    from ledger.services.gate.gate import check_verdict
    from ledger.services.gate.recording import record_call

    print(f"\n== 3. in-process verdict + durable append ({calls} calls) ==")
    home = workdir / "rate"
    init_home(home)
    runtime = Runtime(home, clean_env(**BASE_ENV_EXTRA))
    check_verdict(runtime, 10_000)  # load keys, create state
    start = time.perf_counter()
    for _ in range(calls):
        outcome = check_verdict(runtime, 10_000)
        check(outcome.verdict_ref is not None, "verdict not recorded")
    elapsed = time.perf_counter() - start
    print(
        f"  check_verdict: {calls / elapsed:8.0f} calls/s   ({elapsed / calls * 1e3:.3f} ms/call)"
    )
    start = time.perf_counter()
    for _ in range(calls):
        record_call(runtime, 10_000, "openai")
    elapsed = time.perf_counter() - start
    print(
        f"  record_call:   {calls / elapsed:8.0f} calls/s   ({elapsed / calls * 1e3:.3f} ms/call)"
    )
    probe = workdir / "fsync.probe"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    line = b"x" * 700 + b"\n"
    start = time.perf_counter()
    for _ in range(calls):
        os.write(fd, line)
        os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    print(f"  bare write+fsync of a 700-byte line: {calls / elapsed:8.0f} /s (the disk's floor)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small, fast run")
    parser.add_argument("--entries", type=int, help="the big chain's length")
    parser.add_argument("--runs", type=int, help="cold process runs")
    parser.add_argument("--verdicts", type=int, help="timed verdicts per chain length")
    parser.add_argument("--calls", type=int, help="in-process calls for the rate")
    parser.add_argument("--state", choices=("verify", "fold"), default="verify")
    parser.add_argument(
        "--only", choices=("cold", "imports", "rate", "scale"), action="append", default=None
    )
    args = parser.parse_args(argv)
    entries = args.entries or (20_000 if args.quick else 1_000_000)
    runs = args.runs or (10 if args.quick else 30)
    verdicts = args.verdicts or (50 if args.quick else 200)
    calls = args.calls or (200 if args.quick else 1000)
    sections = set(args.only or ("cold", "imports", "rate", "scale"))
    print(
        f"bench_gate: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"entries={entries:,} runs={runs} verdicts={verdicts} calls={calls} state={args.state}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        workdir = Path(tmp)
        if "cold" in sections:
            cold_process(workdir, runs)
        if "imports" in sections:
            import_times(3 if args.quick else 5)
        if "rate" in sections:
            inprocess_rate(workdir, calls)
        if "scale" in sections:
            scale(workdir, 1_000, entries, verdicts, args.state)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
