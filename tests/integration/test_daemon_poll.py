"""`ledger daemon` polls the bill (SPEC §5, Polling): the real APScheduler, real processes.

The daemon runs on the real clock (it refuses ``LEDGER_NOW``), so these tests
write billing times from the real clock too, and hold for any date and time.
"""

import datetime as dt
import itertools
import json
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conftest import REPO, Result, clean_env, run_process
from tests.integration.test_daemon import Lines


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entries(home: Path) -> list[dict[str, Any]]:
    chain = home / "events.jsonl"
    if not chain.exists():
        return []
    return [json.loads(line) for line in chain.read_text().splitlines()]


def of_type(home: Path, event_type: str) -> list[dict[str, Any]]:
    return [e for e in entries(home) if e["event_type"] == event_type]


@contextmanager
def daemon(home: Path, env: dict[str, str], *options: str) -> Iterator[Lines]:
    """A real ``ledger daemon [OPTIONS]`` process; stopped with SIGTERM on the way out.

    With ``--no-serve`` no child holds its stderr, so the reader sees the end
    of it even after a kill.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "daemon", *options],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines = Lines(proc.stderr)
    try:
        assert lines.wait_for("started"), lines.lines
        yield lines
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0, lines.lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        lines.join()
        assert proc.stderr is not None
        proc.stderr.close()


def verdict(home: Path, env: dict[str, str], usd: str) -> Result:
    return run_process(["--home", str(home), "verdict", usd], env)


def test_out_of_band_spend_halts_the_next_verdict_within_one_poll(home: Path, tmp_path: Path):
    """$49 of a $50 cap spent outside ledger: after one poll a $2 call halts at the cap."""
    bill = tmp_path / "bill.json"
    bill.write_text(json.dumps({"usd_used": 0, "billing_ts": iso(utc_now())}))
    observer = [sys.executable, str(REPO / "observers" / "file_observer.py"), "--file", str(bill)]
    env = clean_env(
        LEDGER_OBSERVER_COMMAND=json.dumps(observer),
        LEDGER_USD_DAILY_CAP="50",
        LEDGER_BILLING_POLL_SECONDS="1",
    )
    with daemon(home, env) as lines:
        assert any("poll every 1 s" in line for line in lines.lines), lines.lines
        assert lines.wait_for("reconcile aggregate: ok"), lines.lines
        # Another tool spends $49 on the same account: only the bill knows.
        bill.write_text(json.dumps({"usd_used": 49, "billing_ts": iso(utc_now())}))
        assert lines.wait_for("poll aggregate: recorded billing=$49.00"), lines.lines
        result = verdict(home, env, "2")
        observed = of_type(home, "budget.observation")[-1]["payload"]
        if result.json()["utc_day"] != observed["fetched_at"][:10]:
            # The poll was fetched before UTC midnight and counts for that day; the
            # next poll is the new day's reading.
            count = sum("billing=$49.00" in line for line in lines.lines)
            assert lines.wait_for("poll aggregate: recorded billing=$49.00", count + 1)
            result = verdict(home, env, "2")
    assert result.code == 1, result.stderr
    body = result.json()
    assert body["verdict"] == "halt-100"
    assert body["usd_used"] == 49
    assert body["deciding_cap"] == "aggregate"
    polls = [e["payload"] for e in of_type(home, "budget.observation")]
    assert polls
    assert {p["source"] for p in polls} == {"poll"}  # the verdict ran no observer itself
    assert {p["usd_used_micros"] for p in polls} <= {0, 49_000_000}
    assert len(of_type(home, "budget.reconcile")) == 1  # the one at start: polls never reconcile
    assert run_process(["--home", str(home), "verify-chain"], env).code == 0


def sequenced_observer(tmp_path: Path, answers: list[str]) -> tuple[list[str], Path]:
    """An observer that gives ``answers`` in turn (the last one from then on).

    ``sleep`` hangs until the observer is killed. Each run appends its number to
    ``runs`` first, so a test knows when one has started.
    """
    runs = tmp_path / "runs"
    script = tmp_path / "sequenced.py"
    script.write_text(
        "import json, os, sys, time\n"
        f"answers = {answers!r}\n"
        f"runs = {str(runs)!r}\n"
        "with open(runs, 'a') as handle:\n"
        "    handle.write('run\\n')\n"
        "count = len(open(runs).read().split())\n"
        "answer = answers[min(count, len(answers)) - 1]\n"
        "if answer == 'sleep':\n"
        "    time.sleep(60)\n"
        "print(answer)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return [sys.executable, str(script)], runs


def wait_for_runs(runs: Path, count: int, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if runs.exists() and len(runs.read_text().split()) >= count:
            return True
        time.sleep(0.02)
    return False


def test_deferred_and_timed_out_polls_write_nothing_and_block_no_verdict(
    home: Path, tmp_path: Path
):
    """_defer and a hung observer leave the chain alone; a verdict meanwhile answers at once."""
    defer = json.dumps({"_defer": True, "_reason": "rate_limited"})
    # Run 1 is the reconcile at start, run 2 the first poll, run 3 on hang.
    command, runs = sequenced_observer(tmp_path, [defer, defer, "sleep"])
    env = clean_env(
        LEDGER_OBSERVER_COMMAND=json.dumps(command),
        LEDGER_OBSERVER_TIMEOUT_SECONDS="3",
        LEDGER_BILLING_POLL_SECONDS="1",
    )
    with daemon(home, env) as lines:
        assert lines.wait_for("poll aggregate: defer reason=rate_limited"), lines.lines
        assert wait_for_runs(runs, 3), lines.lines  # a poll's observer is now hanging
        started = time.monotonic()
        result = verdict(home, env, "1")
        elapsed = time.monotonic() - started
        hung_poll_ended = any("poll aggregate: unreachable" in line for line in lines.lines)
        assert lines.wait_for("poll aggregate: unreachable reason="), lines.lines
    assert result.code == 0, result.stderr
    assert result.json()["verdict"] == "allow"
    assert not hung_poll_ended  # the verdict ran while the poll's observer hung
    assert elapsed < 2.5  # and never waited for it (the observer hangs for 3 s)
    assert [e["event_type"] for e in entries(home)] == ["budget.allow"]


def test_polls_and_reconciles_of_one_provider_never_overlap(home: Path, tmp_path: Path):
    """Every observer run, from the daemon's polls and reconciles and a `ledger reconcile`
    run by cron meanwhile, holds the provider's bill alone."""
    log = tmp_path / "intervals"
    script = tmp_path / "timed.py"
    script.write_text(
        "import datetime, json, os, sys, time\n"
        "start = time.time()\n"
        "time.sleep(0.3)\n"
        "now = datetime.datetime.now(datetime.timezone.utc).isoformat()\n"
        "end = time.time()\n"
        f"with open({str(log)!r}, 'a') as handle:\n"
        "    handle.write(f'{start} {end} {os.getpid()}\\n')\n"
        "print(json.dumps({'usd_used': 0, 'billing_ts': now}))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    env = clean_env(
        LEDGER_OBSERVER_COMMAND=json.dumps([sys.executable, str(script)]),
        LEDGER_BILLING_POLL_SECONDS="1",
        LEDGER_RECONCILE_INTERVAL_HOURS="0.0002",  # 0.72 s
    )
    with daemon(home, env) as lines:
        assert lines.wait_for("poll aggregate: recorded", count=2), lines.lines
        cron = run_process(["--home", str(home), "reconcile"], env)
        assert cron.code == 0, cron.stderr
        assert lines.wait_for("reconcile aggregate: ok", count=3), lines.lines
    intervals = sorted(
        (float(start), float(end)) for start, end, _pid in
        (line.split() for line in log.read_text().splitlines())
    )  # fmt: skip
    assert len(intervals) >= 5  # >= 2 polls, >= 2 daemon reconciles, 1 by cron
    for (_, end), (start, _) in itertools.pairwise(intervals):
        assert start >= end, intervals
    polls = [e for e in of_type(home, "budget.observation") if e["payload"]["source"] == "poll"]
    assert len(polls) >= 2
    assert len(of_type(home, "budget.reconcile")) >= 3
    assert run_process(["--home", str(home), "verify-chain"], env).code == 0
