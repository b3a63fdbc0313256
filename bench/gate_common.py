"""What bench_gate.py and its scale section (gate_scale.py) share: the benchmark clock
and budget, a clean environment, homes made with the installed ``ledger`` console
script, and percentile and millisecond formatting."""

import datetime as dt
import os
import subprocess
from pathlib import Path

from common import ledger_script

NOW = dt.datetime(2026, 3, 1, 20, 0, 0, tzinfo=dt.UTC)
CAP_USD = "1000000000"  # large enough that every benchmark verdict is admitted
BASE_ENV_EXTRA = {"LEDGER_BILLING_STALE_HALT_PCT": "100"}


def check(condition: bool, what: str) -> None:
    """Stop the benchmark if an assumption does not hold."""
    if not condition:
        raise SystemExit(f"bench_gate: {what}")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(extra)
    return env


def iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def init_home(path: Path) -> None:
    proc = subprocess.run(
        [ledger_script(), "--home", str(path), "init", "--daily-cap-usd", CAP_USD],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"ledger init failed: {proc.stderr}")
