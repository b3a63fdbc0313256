"""What adding a budget costs the next verdict on a long chain, and where that time goes.

Builds a home of ``--entries`` records spread over eight days of one month
(``tests.helpers.bighome``: the product's own sealing bytes and key), builds
its derived state with one verdict, times the median of five normal verdicts,
then adds a ``[[budgets]]`` table (``--period``, default a month, so the new
budget counts every entry) and times the next verdict while others are issued
back to back beside it (goal, SPEC §21: within 2x of the median, none refused).
The median is of five normal verdicts timed the same way, beside others; the
median alone is printed too.
Three cases, each on its own copy of the home: the rollups current (as the
daemon, the gateway or ``ledger serve`` keep them; here ``ledger report``
brings them up to date before the change), no rollups at all (the budget is
folded from the chain), and a raised cap of an existing budget.
With ``--profile`` the verdict after the change runs again on a fresh copy
under cProfile and the functions that took longest are printed, to show what
counting the new budget's current period spends its time on.

Every figure is wall time of a whole ``python -m ledger verdict`` process, so
the median includes the interpreter's start; the load is printed beside it::

    PYTHONPATH=$PWD nice -n 10 python bench/bench_budget_change.py --entries 100000
"""

import argparse
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import bench_scale_lock  # noqa: E402

# The chain ends 2026-11-30 08:00 (``bighome`` starts on the 22nd); an hour later
# a day's, a week's and a month's budget all count entries of the chain.
_NOW = "2026-11-30T09:00:00Z"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["LEDGER_NOW"] = _NOW
    return env


def _ledger(home: Path, *args: str, prefix: tuple[str, ...] = ()) -> tuple[int, float, str]:
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *prefix, "-m", "ledger", "--home", str(home), *args],
        capture_output=True, text=True, env=_env(), check=False,
    )  # fmt: skip
    return proc.returncode, time.perf_counter() - began, proc.stderr.strip()


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def build(workdir: Path, entries: int) -> Path:
    """The lock bench's home (the same entries over the same days), read at this bench's clock."""
    home = bench_scale_lock.build(workdir, entries, _env())
    print(f"  ({_load()})")
    return home


def _add_budget(home: Path, period: str) -> None:
    config = home / "ledger.toml"
    config.write_text(
        config.read_text() + f'\n[[budgets]]\nname = "new"\nusd = 1000000\nperiod = "{period}"\n'
    )


def _counted_budget(home: Path, period: str) -> None:
    """The new budget added and counted (by a verdict) before the timing starts."""
    _add_budget(home, period)
    code, _took, err = _ledger(home, "verdict", "0.01")
    if code != 0:
        raise SystemExit(f"verdict failed: {err}")


def _raise_cap(home: Path, _period: str) -> None:
    config = home / "ledger.toml"
    text = config.read_text()
    config.write_text(
        text.replace('name = "new"\nusd = 1000000\n', 'name = "new"\nusd = 2000000\n')
    )
    if config.read_text() == text:
        raise SystemExit("the new budget is not in the bench home's ledger.toml")


def _nothing(_home: Path, _period: str) -> None:
    pass


# case: (rollups brought current first, before the timing, the change, what it is)
CASES = {
    "rollups current": (True, _nothing, _add_budget, "a {period} budget added"),
    "no rollups": (False, _nothing, _add_budget, "a {period} budget added"),
    "cap raised": (False, _counted_budget, _raise_cap, "its cap raised"),
}


def change(home: Path, period: str, case: str) -> None:
    current, prepare, edit, what = CASES[case]
    prepare(home, period)
    alone = statistics.median(_ledger(home, "verdict", "0.01")[1] for _ in range(5))
    # The verdict after the change is timed with others issued back to back
    # beside it (to see that none is refused), so the yardstick is a normal
    # verdict timed the same way: on two cores the neighbours alone slow it.
    median = statistics.median(
        bench_scale_lock.next_verdict_beside_others(home, _env())[1] for _ in range(5)
    )
    print(f"  [{case}] normal verdict: median {median * 1000:.0f} ms of 5 beside others, "
          f"{alone * 1000:.0f} ms alone ({_load()})")  # fmt: skip
    if current:
        code, took, err = _ledger(home, "report", "--month", _NOW[:7])
        if code != 0:
            raise SystemExit(f"report failed: {err}")
        print(f"  [{case}] rollups brought current by `ledger report` in {took:.1f} s")
    edit(home, period)
    code, took, err, others, refused = bench_scale_lock.next_verdict_beside_others(home, _env())
    verdict = "OK" if code == 0 and took <= 2 * median else "ABOVE GOAL"
    print(f"  [{case}] {what.format(period=period)}: next verdict {took * 1000:.0f} ms = {took / median:.1f}x "
          f"the median (goal <= 2x: {verdict}){'' if code == 0 else ' ' + err}; meanwhile "
          f"{len(others)} verdicts, refused {refused}, slowest {max(others, default=0):.2f} s "
          f"({_load()})")  # fmt: skip


def profile(home: Path, period: str, top: int) -> None:
    code, _took, err = _ledger(home, "report", "--month", _NOW[:7])  # the rollups current
    if code != 0:
        raise SystemExit(f"report failed: {err}")
    _add_budget(home, period)
    out = home.parent / "verdict.prof"
    code, took, err = _ledger(home, "verdict", "0.01", prefix=("-m", "cProfile", "-o", str(out)))
    if code != 0:
        raise SystemExit(f"profiled verdict failed: {err}")
    print(f"  profiled verdict after the change: {took:.2f} s; its costliest functions:")
    stats = pstats.Stats(str(out))
    rows = sorted(stats.stats.items(), key=lambda item: item[1][3], reverse=True)  # type: ignore[attr-defined]
    for (path, line, name), (_cc, _nc, _tt, cumulative, _callers) in rows[:top]:
        print(f"    {cumulative:7.2f} s  {Path(path).name}:{line}({name})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--period", default="month", help="the period of the budget added")
    parser.add_argument(
        "--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES)
    )
    parser.add_argument("--profile", action="store_true", help="also profile the verdict")
    parser.add_argument("--top", type=int, default=25, help="functions the profile shows")
    parser.add_argument(
        "--keep", help="build the home here and keep it (a home kept there is used again)"
    )
    args = parser.parse_args()
    print(f"== adding a budget on a {args.entries:,}-entry home (ledger from "
          f"{os.environ.get('PYTHONPATH', 'the installed package')}) ==")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-budget-change-") as tmp:
        workdir = Path(args.keep) if args.keep else Path(tmp)
        home = workdir / "home"
        if args.keep and home.exists():
            print(f"  the home kept in {workdir} is used again")
        else:
            home = build(workdir, args.entries)
        cases = [case for case in args.cases.split(",") if case]
        for name in [*cases, "profile"] if args.profile else cases:
            copy = workdir / "copy" / "home"
            shutil.copytree(home, copy, symlinks=True)
            if name == "profile":
                profile(copy, args.period, args.top)
            else:
                change(copy, args.period, name)
            shutil.rmtree(copy.parent)


if __name__ == "__main__":
    main()
