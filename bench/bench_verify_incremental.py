"""Incremental ``verify-chain`` and ``checkpoint`` by chain length, in CPU seconds (SPEC §21).

The goal: ``verify-chain`` (incremental) within 1.2x of its 10k figure, and
``checkpoint`` within 2x, whatever the length. Each home (``bench_scale.build``:
the product's own writer, sealed in segments of ``--seal-every`` entries) gets
a first ``checkpoint`` (from line 1: it keeps the verified mark), then rounds
of 20 new verdicts, an incremental ``verify-chain`` and a ``checkpoint``; the
figure is the median round's CPU seconds (user + system) of the command's
process, so a busy shared machine moves it less than wall time.

Compare two checkouts on the same homes by running it with each first on
PYTHONPATH (every run starts with its own first checkpoint), from a folder
outside any checkout (``python -m`` puts the current folder first)::

    cd /tmp && PYTHONPATH=/path/to/checkout python /path/to/bench_verify_incremental.py --keep /tmp/homes
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import _env, _json, build

_WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
    "used = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(code, used.ru_utime + used.ru_stime, used.ru_maxrss)\n"
)
_ROUNDS = 3
_NEW_VERDICTS = 20


def _cpu(home: Path, *args: str) -> tuple[float, float]:
    """(CPU seconds, peak MiB) of ``ledger --home HOME ARGS`` in a process of its own."""
    argv = [sys.executable, "-m", "ledger", "--home", str(home), *args]
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *argv], env=_env(), capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    code, used, peak = done.stdout.split()
    if int(code) != 0:
        raise SystemExit(f"{' '.join(args)} exited {code}")
    return float(used), int(peak) / 1024


def measure(home: Path) -> dict[str, tuple[float, float]]:
    """The median round's figures of each command after a first checkpoint."""
    _cpu(home, "checkpoint")
    rounds: dict[str, list[tuple[float, float]]] = {"verify-chain": [], "checkpoint": []}
    for _ in range(_ROUNDS):
        for _ in range(_NEW_VERDICTS):
            _json(home, "verdict", "0.01")
        for row, figures in rounds.items():
            figures.append(_cpu(home, row))
    return {
        row: (statistics.median(c for c, _p in figures), max(p for _c, p in figures))
        for row, figures in rounds.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,200000")
    parser.add_argument("--seal-every", type=int, default=50000)
    parser.add_argument("--keep", help="build the homes here and keep them (used again)")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"== incremental verify-chain and checkpoint, CPU s (ledger from "
          f"{os.environ.get('PYTHONPATH', 'the installed package')}; load "
          f"{os.getloadavg()[0]:.2f}) ==")  # fmt: skip
    figures: dict[int, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-incremental-") as tmp:
        workdir = Path(args.keep or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            home, _ref, _built, _bytes = build(workdir, size, args.seal_every)
            figures[size] = measure(home)
    first, last = sizes[0], sizes[-1]
    print("| command | " + " | ".join(f"{size:,}: CPU s / MiB" for size in sizes) + " | ratio |")
    print("|---" * (len(sizes) + 2) + "|")
    for row in ("verify-chain", "checkpoint"):
        cells = [f"{figures[size][row][0]:.2f} / {figures[size][row][1]:.0f}" for size in sizes]
        ratio = figures[last][row][0] / max(figures[first][row][0], 1e-9)
        print(f"| {row} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
    print(f"(load afterwards {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
