"""How every operation ages: one table of time and peak memory at several chain lengths.

For each size (``--sizes 10000,1000000``) a home is built with the product's
own sealing bytes and writer key (``tests.helpers.bighome``: entries spread over
the eight days before the bench's fixed now), its derived state built once by a
first verdict, and then each operation runs as its own process, timed from
outside, its peak resident memory read from the kernel (``ru_maxrss`` of a
wrapper's only child). Ratios are against the first size, in the same run.

The rows are SPEC's goals: per-call figures (verdict, status, usage) within
1.2x of the smallest home; ``verify-chain`` (incremental, the default) within
1.2x; ``checkpoint``, ``snapshot``, ``report --month``, ``explain`` and
``prove`` of the newest verdict within 2x; no operation above 100 MiB.
``verify-chain --full`` is shown with its throughput (entries a second).
The rows ending in ``then`` run again after 20 new verdicts, from the marks,
rollups and checkpoints the first runs left.

Run it against another checkout by putting that checkout first on PYTHONPATH,
from a folder outside any checkout (``python -m`` puts the current folder
before PYTHONPATH, so run from a checkout it measures that one)::

    cd /tmp && PYTHONPATH=/path/to/checkout python /path/to/bench/bench_scale.py
"""

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.helpers.bighome import START, append_entries  # noqa: E402

_DAYS = 8
NOW = (START + dt.timedelta(days=_DAYS, hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
MONTH = START.strftime("%Y-%m")
# One process per operation: its exit code, its wall time and its peak RSS (KiB).
_WRAPPER = (
    "import resource, subprocess, sys, time\n"
    "began = time.perf_counter()\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,"
    " stderr=subprocess.PIPE).returncode\n"
    "took = time.perf_counter() - began\n"
    "print(code, took, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    env.update(LEDGER_NOW=NOW, LEDGER_BILLING_STALE_HALT_PCT="100")
    return env


def _run(home: Path, *args: str) -> tuple[int, float, float]:
    """(exit code, seconds, peak MiB) of ``ledger --home HOME ARGS`` in a process of its own."""
    argv = [sys.executable, "-m", "ledger", "--home", str(home), *args]
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *argv], env=_env(), capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    code, took, peak = done.stdout.split()
    return int(code), float(took), int(peak) / 1024


def _json(home: Path, *args: str) -> dict[str, object]:
    argv = [sys.executable, "-m", "ledger", "--home", str(home), *args]
    done = subprocess.run(argv, env=_env(), capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.strip()}")
    parsed: dict[str, object] = json.loads(done.stdout)
    return parsed


def build(workdir: Path, entries: int, seal_every: int | None) -> tuple[Path, str, float, int]:
    """A home of ``entries`` entries; the ref of a verdict sealed last; seconds; bytes.

    ``seal_every``: the chain sealed in segments of that many entries, as the
    product seals them (``None``: the default, one open segment up to 1M).
    """
    home = workdir / f"home-{entries}"
    if (home / "events.jsonl").exists():  # kept by an earlier run (--keep): used as it is
        verdict = _json(home, "verdict", "0.01")
        # The chain's own bytes: each sealed segment's as its manifest gives them, uncompressed.
        chain = sum(
            int(json.loads(p.read_text())["size"]) for p in (home / "segments").glob("[0-9]*.json")
        )
        return (
            home,
            str(verdict["verdict_ref"]),
            0.0,
            chain + (home / "events.jsonl").stat().st_size,
        )
    argv = [
        sys.executable,
        "-m",
        "ledger",
        "--home",
        str(home),
        "init",
        "--daily-cap-usd",
        "1000000",
        "--billing",
        "none",
    ]
    subprocess.run(argv, env=_env(), capture_output=True, check=True)
    began = time.perf_counter()
    size = append_entries(
        home, entries, _env(), step=dt.timedelta(days=_DAYS) / entries, seal_every=seal_every
    )
    verdict = _json(home, "verdict", "0.01")
    return home, str(verdict["verdict_ref"]), time.perf_counter() - began, size


# Not a row: the verdicts sealed before the rows that follow it.
_NEW_VERDICTS = "20 new verdicts"


def operations(ref: str) -> list[tuple[str, tuple[str, ...], float]]:
    """(row, arguments, goal as a ratio to the smallest home)."""
    return [
        ("verdict", ("verdict", "0.01"), 1.2),
        ("status", ("status",), 1.2),
        ("usage", ("usage",), 1.2),
        ("verify-chain", ("verify-chain",), 1.2),
        ("checkpoint", ("checkpoint",), 2.0),
        ("report --month", ("report", "--month", MONTH), 2.0),
        ("explain newest", ("explain", ref), 2.0),
        ("prove newest", ("prove", "inclusion", ref), 2.0),
        ("metrics", ("metrics",), 2.0),
        ("snapshot", ("snapshot",), 2.0),
        # The same again after a few new verdicts: what a daemon or a person
        # running them every day pays (the cold rows above start from nothing).
        (_NEW_VERDICTS, ("verdict", "0.01"), 0.0),
        ("verify-chain, then", ("verify-chain",), 1.2),
        ("checkpoint, then", ("checkpoint",), 2.0),
        ("report --month, then", ("report", "--month", MONTH), 2.0),
        ("snapshot, then", ("snapshot",), 2.0),
        ("verify-chain --full", ("verify-chain", "--full"), 0.0),
        ("rebuild-state", ("rebuild-state",), 0.0),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument(
        "--keep", help="build the homes here and keep them (a home kept there is used again)"
    )
    parser.add_argument(
        "--row", action="append", help="only this row (repeat for more; default: every row)"
    )
    parser.add_argument(
        "--seal-every", type=int, help="seal the chain in segments of this many entries"
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    # Row names hold commas ("verify-chain, then"), so each is given on its own.
    wanted_rows = set(args.row) if args.row else None
    print(f"== every operation by chain length (ledger from "
          f"{os.environ.get('PYTHONPATH', 'the installed package')}) ==")  # fmt: skip
    figures: dict[str, dict[int, tuple[int, float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        workdir = Path(args.keep or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            home, ref, built, chain_bytes = build(workdir, size, args.seal_every)
            on_disk = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
            print(f"  built {size:,} entries in {built:.0f} s ({chain_bytes / 1e6:.0f} MB "
                  f"of chain, {on_disk / 1e6:.0f} MB on disk)", flush=True)  # fmt: skip
            for row, argv, _goal in operations(ref):
                if wanted_rows is not None and row not in wanted_rows:
                    continue
                if row == _NEW_VERDICTS:
                    for _ in range(20):
                        _json(home, *argv)
                    continue
                figures.setdefault(row, {})[size] = code, took, peak = _run(home, *argv)
                # Each row as it ends: a long run that is stopped keeps what it measured.
                print(f"  {size:,} {row}: {took:.2f} s, {peak:.0f} MiB, exit {code}", flush=True)
            on_disk = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
            print(f"  after the rows: {on_disk / 1e6:.0f} MB on disk, "
                  f"{on_disk / max(chain_bytes, 1):.2f}x the chain's own bytes "
                  "(goal with the default retention: <= 2x)", flush=True)  # fmt: skip
            if not args.keep:
                shutil.rmtree(home)
    first = sizes[0]
    head = "| operation | " + " | ".join(f"{size:,}: s / MiB" for size in sizes)
    print(head + " | ratio (last/first) | goal |")
    print("|---" * (len(sizes) + 3) + "|")
    for row, _argv, goal in operations("x"):
        if row not in figures:
            continue
        cells = []
        for size in sizes:
            code, took, peak = figures[row][size]
            cells.append(f"{took:.2f} / {peak:.0f}" + ("" if code in (0, 1) else f" (exit {code})"))
        ratio = figures[row][sizes[-1]][1] / max(figures[row][first][1], 1e-9)
        worst = max(peak for _code, _took, peak in figures[row].values())
        meets = (goal == 0 or ratio <= goal) and worst <= 100
        wanted = f"<= {goal}x, <= 100 MiB" if goal else "<= 100 MiB"
        print(f"| {row} | " + " | ".join(cells) + f" | {ratio:.2f}x | {wanted}: "
              f"{'met' if meets else 'NOT MET'} |")  # fmt: skip


if __name__ == "__main__":
    main()
