"""Outages on a long chain: a daemon start, a budget change and a key rotation.

Builds a home of ``--entries`` entries spread over eight days (the product's
sealing bytes, signed with the home's own key; ``tests.helpers.bighome``),
builds its derived state with one verdict, then measures, each on a fresh copy:

- **daemon start**: ``ledger daemon --no-serve`` starts (it verifies the chain
  and takes the missed daily snapshot at once) while one-shot verdicts are
  issued back to back until both jobs have logged; refused verdicts are
  counted (goal: none) and the slowest verdict is shown;
- **budget change**: the median of five verdicts, then a ``[[budgets]]`` day
  budget added to ``ledger.toml`` and the next verdict timed (goal: within 2x
  of the median);
- **key rotation**: ``ledger keys rotate``, then the next verdict timed;
- **rebuild**: ``ledger rebuild-state`` (its time and peak memory) while
  one-shot verdicts are issued back to back; refused verdicts are counted
  (goal: none).

Run it against another checkout by putting that checkout first on PYTHONPATH
(the commands run as ``python -m ledger``)::

    PYTHONPATH=$PWD python bench/bench_scale_lock.py --entries 100000
"""

import argparse
import datetime as dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.helpers.bighome import append_entries  # noqa: E402

_DAYS = 8


# The clock every command reads (``--now``); unset: the real clock.
_NOW: list[str] = []


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    if _NOW:
        env["LEDGER_NOW"] = _NOW[0]
    env.update(extra)
    return env


def _ledger(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, float, str]:
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), *args],
        capture_output=True, text=True, env=env or _env(), check=False,
    )  # fmt: skip
    return proc.returncode, time.perf_counter() - began, proc.stderr.strip()


def build(workdir: Path, entries: int, env: dict[str, str] | None = None) -> Path:
    """A home of ``entries`` over ``_DAYS`` days; ``env``: the commands' own (else ``_env()``)."""
    env = env or _env()
    home = workdir / "home"
    code, _, err = _ledger(home, "init", "--daily-cap-usd", "1000000", env=env)
    if code != 0:
        raise SystemExit(f"init failed: {err}")
    began = time.perf_counter()
    size = append_entries(home, entries, env, step=dt.timedelta(days=_DAYS) / entries)
    print(f"  chain: {entries:,} entries, {size / 1e6:.1f} MB, built in "
          f"{time.perf_counter() - began:.1f} s")  # fmt: skip
    code, took, err = _ledger(home, "verdict", "0.01", env=env)
    if code != 0:
        raise SystemExit(f"first verdict failed: {err}")
    print(f"  first verdict (builds the derived state from line 1): {took:.1f} s")
    return home


def daemon_start(home: Path, limit: float) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "daemon", "--no-serve"],
        env=_env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True)
    reader.start()
    began = time.monotonic()
    times, refused = [], []
    while time.monotonic() - began < limit:
        code, took, err = _ledger(home, "verdict", "0.01")
        times.append(took)
        if code != 0:
            refused.append(err.splitlines()[-1] if err else f"exit {code}")
        logged = "".join(lines)
        if "verify: " in logged and "snapshot: " in logged:
            break
    jobs_done = time.monotonic() - began
    proc.terminate()
    proc.wait(timeout=600)
    print(f"  daemon start: {len(times)} verdicts in {jobs_done:.1f} s while it verified and "
          f"snapshotted; refused {len(refused)}; slowest verdict {max(times):.2f} s")  # fmt: skip
    for line in refused[:3]:
        print(f"      refused: {line}")


def next_verdict_beside_others(
    home: Path, env: dict[str, str], settle: float = 0.0
) -> tuple[int, float, str, list[float], int]:
    """The next verdict (exit code, seconds, stderr), and verdicts issued back to back beside it.

    The others start ``settle`` seconds after it and stop when it ends: their
    times, and how many were refused (the goal: none).
    """
    began = time.perf_counter()
    first = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "verdict", "0.01"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(settle)
    others, refused = [], 0
    while first.poll() is None:
        code, took, _err = _ledger(home, "verdict", "0.01", env=env)
        others.append(took)
        refused += code != 0
    took = time.perf_counter() - began
    code = first.wait()
    err = (first.stderr.read() if first.stderr else "").strip()
    return code, took, err, others, refused


def budget_change(home: Path, period: str = "day") -> None:
    normal = [_ledger(home, "verdict", "0.01")[1] for _ in range(5)]
    config = home / "ledger.toml"
    config.write_text(
        config.read_text() + f'\n[[budgets]]\nname = "new"\nusd = 500\nperiod = "{period}"\n'
    )
    # It is counting the new budget 0.5 s in: the others are issued from then.
    code, took, err, others, refused = next_verdict_beside_others(home, _env(), settle=0.5)
    median = statistics.median(normal)
    verdict = "OK" if code == 0 and took <= 2 * median else "ABOVE GOAL"
    print(f"  budget change ({period}): next verdict {took:.2f} s vs median {median:.2f} s: "
          f"{took / median:.2f}x (goal <= 2x: {verdict}){'' if code == 0 else ' ' + err}; "
          f"meanwhile {len(others)} verdicts, refused {refused}, slowest "
          f"{max(others, default=0):.2f} s")  # fmt: skip


def key_rotation(home: Path) -> None:
    normal = statistics.median(_ledger(home, "verdict", "0.01")[1] for _ in range(3))
    code, rotate, err = _ledger(home, "keys", "rotate")
    if code != 0:
        raise SystemExit(f"keys rotate failed: {err}")
    code, took, err = _ledger(home, "verdict", "0.01")
    print(f"  key rotation: rotate {rotate:.2f} s; next verdict {took:.2f} s "
          f"({took / normal:.2f}x the median {normal:.2f} s){'' if code == 0 else ' ' + err}")  # fmt: skip


# Runs one command as its only child and prints that child's peak memory (KiB).
_MEASURE = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def rebuild(home: Path) -> None:
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", _MEASURE, sys.executable, "-m", "ledger", "--home", str(home),
         "rebuild-state"],
        env=_env(), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    times, refused = [], []
    while proc.poll() is None:
        code, took, err = _ledger(home, "verdict", "0.01")
        times.append(took)
        if code != 0:
            refused.append(err.splitlines()[-1] if err else f"exit {code}")
    took = time.perf_counter() - began
    code_text, peak = (proc.stdout.read() if proc.stdout else "0 0").split()
    print(f"  rebuild-state: {took:.1f} s, peak {int(peak) / 1024:.0f} MiB (exit {code_text}); "
          f"meanwhile {len(times)} verdicts, refused {len(refused)}, slowest "
          f"{max(times, default=0):.2f} s")  # fmt: skip
    for line in refused[:3]:
        print(f"      refused: {line}")
    print("      verdict times: " + " ".join(f"{t:.2f}" for t in times[:12]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--limit", type=float, default=600.0, help="seconds for the daemon row")
    parser.add_argument(
        "--rows", default="daemon,budgets,keys,rebuild", help="rows to run, comma-separated"
    )
    parser.add_argument("--budget-period", default="day", help="the budget the budgets row adds")
    parser.add_argument(
        "--now", help="the clock for every command, e.g. 2026-11-30T09:00:00Z (the chain "
        "ends 2026-11-30 08:00, so a day's or a month's budget then counts its entries)",
    )  # fmt: skip
    args = parser.parse_args()
    _NOW[:] = [args.now] if args.now else []
    print(f"== outages on a {args.entries:,}-entry home (ledger from "
          f"{os.environ.get('PYTHONPATH', 'the installed package')}) ==")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-scale-lock-") as tmp:
        workdir = Path(tmp)
        home = build(workdir, args.entries)
        for name, row in (("daemon", lambda h: daemon_start(h, args.limit)),
                          ("budgets", lambda h: budget_change(h, args.budget_period)),
                          ("keys", key_rotation), ("rebuild", rebuild)):  # fmt: skip
            if name not in args.rows.split(","):
                continue
            copy = workdir / name
            shutil.copytree(home, copy, symlinks=True)
            row(copy)
            shutil.rmtree(copy)


if __name__ == "__main__":
    main()
