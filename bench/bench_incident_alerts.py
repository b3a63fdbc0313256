"""How long after a company-wide halt the operator hears of it (not a test, prints a report).

    python bench/bench_incident_alerts.py [--check-seconds N] [--runs R]

A real ``ledger daemon --no-serve`` with one ``[[alerts]]`` webhook (a local HTTP
server) measures, R times each:

1. a torn chain (the last line cut short) → the ``broken`` alert, then
   ``ledger recover`` → the ``recovered`` alert;
2. a fleet's PostgreSQL server stopped (``pg_ctl stop -m immediate``) → the
   ``unavailable`` alert, then started again → ``recovered``.

Times are wall-clock seconds from the damage (or the recovery step's end) to
the webhook receiving the POST; the expected figure is at most
``alerts.check_seconds`` plus the check itself.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import clean_env, run_process  # noqa: E402
from tests.integration.test_daemon_alerts import Webhook  # noqa: E402
from tests.integration.test_daemon_poll import daemon  # noqa: E402
from tests.pg import new_server  # noqa: E402


def _env(url: str, check_seconds: int, **extra: str) -> dict[str, str]:
    return clean_env(
        LEDGER_ALERTS=f'[{{"url": "{url}"}}]',
        LEDGER_ALERTS_CHECK_SECONDS=str(check_seconds),
        LEDGER_BILLING_STALE_HALT_PCT="100",
        LEDGER_NO_SERVER="1",
        **extra,
    )


def _check(ok: bool, what: object) -> None:
    if not ok:
        raise SystemExit(f"bench_incident_alerts: {what}")


def _ran(args: list[str], env: dict[str, str]) -> None:
    result = run_process(args, env)
    _check(result.code == 0, f"{' '.join(args[2:])}: exit {result.code}: {result.stderr}")


def _wait(hook: Webhook, count: int, since: float) -> float:
    bodies = hook.wait_for(count, timeout=120)
    _check(len(bodies) >= count, bodies)
    return time.monotonic() - since


def torn(check_seconds: int, runs: int, root: Path) -> tuple[list[float], list[float]]:
    to_alert, to_recovered = [], []
    for run in range(runs):
        home = root / f"torn{run}"
        hook = Webhook()
        env = _env(hook.url, check_seconds)
        _ran(["--home", str(home), "init", "--daily-cap-usd", "10"], env)
        _ran(["--home", str(home), "verdict", "1"], env)
        with daemon(home, env, "--no-serve"):
            time.sleep(1.5)
            chain = home / "events.jsonl"
            start = time.monotonic()
            chain.write_bytes(chain.read_bytes()[:-7])
            to_alert.append(_wait(hook, 1, start))
            _ran(["--home", str(home), "recover"], env)
            start = time.monotonic()
            to_recovered.append(_wait(hook, 2, start))
        hook.close()
    return to_alert, to_recovered


def stopped_database(check_seconds: int, runs: int, root: Path) -> tuple[list[float], list[float]]:
    server = new_server()
    to_alert, to_recovered = [], []
    try:
        for run in range(runs):
            home = root / f"pg{run}"
            hook = Webhook()
            env = _env(hook.url, check_seconds)
            store = {"LEDGER_STORE_URL": server.url, "LEDGER_STORE_SCHEMA": f"bench{run}"}
            init = ["--home", str(home), "init", "--daily-cap-usd", "10"]
            _ran(init, clean_env(**store))
            with daemon(home, env, "--no-serve"):
                time.sleep(1.5)
                start = time.monotonic()
                server.stop("immediate")
                to_alert.append(_wait(hook, 1, start))
                server.start()
                start = time.monotonic()
                to_recovered.append(_wait(hook, 2, start))
            hook.close()
    finally:
        server.stop("immediate")
    return to_alert, to_recovered


def _show(name: str, values: list[float]) -> str:
    return (
        f"{name:34s} median {statistics.median(values):5.2f} s  "
        f"max {max(values):5.2f} s  (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check-seconds", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        alert, recovered = torn(args.check_seconds, args.runs, root)
        print(f"alerts.check_seconds = {args.check_seconds}")
        print(_show("torn chain -> broken alert", alert))
        print(_show("recover -> recovered alert", recovered))
        alert, recovered = stopped_database(args.check_seconds, args.runs, root)
        print(_show("database stopped -> unavailable", alert))
        print(_show("database started -> recovered", recovered))


if __name__ == "__main__":
    main()
