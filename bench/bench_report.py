"""``ledger report --month`` on a small and a big home: the rollups against the chain's length.

    python bench/bench_report.py [--quick] [--small N] [--big N] [--legacy] [--workdir DIR]

Each home is built fast (``gate_scale.build_chain``: verdict + settling record pairs,
signed in parallel), then ``ledger report --month`` runs as a real process:

* ``first``: the rollups do not exist yet, so the whole chain is verified and folded
  once (what ``rebuild-state`` costs the rollups);
* ``warm``: the rollups are at the head (p50 of 5 runs);
* ``after 100``: 100 more entries sealed first, so the report verifies and folds them.

Goal (SPEC §19): ``warm`` and ``after 100`` on the big home within 3x the small
home's. ``--legacy`` also times the one-day report (``report --day``), which reads
the part of the chain its day depends on (here the whole chain: every entry is
sealed on that day), on both homes.
"""

import argparse
import datetime as dt
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ledger_script
from gate_common import BASE_ENV_EXTRA, NOW, clean_env, init_home, iso
from gate_scale import build_chain, fold_state

MONTH = NOW.strftime("%Y-%m")


def _run(home: Path, *args: str, now: dt.datetime) -> float:
    env = clean_env(**BASE_ENV_EXTRA, LEDGER_NOW=iso(now))
    began = time.perf_counter()
    proc = subprocess.run(
        [ledger_script(), "--home", str(home), *args],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    took = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"bench_report: {' '.join(args)} failed: {proc.stderr.strip()}")
    return took


def _append(home: Path, count: int, now: dt.datetime) -> None:
    from ledger.runtime import Runtime
    from ledger.services.gate.recording import record_call

    runtime = Runtime(home, clean_env(**BASE_ENV_EXTRA, LEDGER_NOW=iso(now)))
    for _ in range(count):
        record_call(runtime, 1_000, "openai", None)


def measure(workdir: Path, entries: int, *, legacy: bool) -> dict[str, float]:
    home = workdir / f"home-{entries}"
    init_home(home)
    size, built = build_chain(home, entries, NOW)
    print(f"  built {entries:,} entries ({size / 1e6:.0f} MB) in {built:.1f} s", flush=True)
    later = NOW + dt.timedelta(hours=2)
    report = ("report", "--month", MONTH, "--by", "provider", "--format", "csv")
    figures = {"first": _run(home, *report, now=later)}
    print(f"  first: {figures['first']:.2f} s", flush=True)
    figures["warm"] = statistics.median(_run(home, *report, now=later) for _ in range(5))
    print(f"  warm: {figures['warm']:.2f} s", flush=True)
    fold_state(home)  # the gate's own state, so the appends below fold nothing old
    _append(home, 100, later)
    figures["after 100"] = _run(home, *report, now=later)
    print(f"  after 100: {figures['after 100']:.2f} s", flush=True)
    if legacy:
        figures["--day"] = _run(home, "report", "--day", NOW.date().isoformat(), "--json",
                                now=later)  # fmt: skip
        print(f"  --day: {figures['--day']:.2f} s", flush=True)
    shutil.rmtree(home)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10k against 100k entries")
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--big", type=int, default=None)
    parser.add_argument("--legacy", action="store_true", help="also time report --day")
    parser.add_argument("--workdir", type=Path, default=None)
    options = parser.parse_args()
    big = options.big or (100_000 if options.quick else 1_000_000)
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="bench-report-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = {}
    for entries in (options.small, big):
        print(f"report --month on {entries:,} entries", flush=True)
        results[entries] = measure(workdir, entries, legacy=options.legacy)
    print(f"\n{'':24}{options.small:>14,}{big:>14,}   ratio")
    for name in results[options.small]:
        small, large = results[options.small][name], results[big][name]
        print(f"{name:24}{small:>12.2f} s{large:>12.2f} s   {large / small:5.2f}x")
    ok = all(
        results[big][name] <= 3 * results[options.small][name] for name in ("warm", "after 100")
    )
    print(f"\ngoal: warm and after-100 month reports within 3x: {'met' if ok else 'NOT met'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
