"""`ledger poll` (SPEC §5, Polling): one read of the bill, recorded only when it succeeds.

The observer is a real executable that prints what a file beside it holds and
counts its runs, so a test can change the provider's answer between commands and
see whether a command ran the observer at all.
"""

import fcntl
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import clean_env, run_process

NOW = "2026-11-22T12:00:00Z"


class Observer:
    """A real observer process: prints ``reply.json`` and appends a line to ``calls``."""

    def __init__(self, tmp_path: Path) -> None:
        self.reply = tmp_path / "reply.json"
        self.calls = tmp_path / "calls"
        self.script = tmp_path / "observer.py"
        self.script.write_text(
            "import sys, time\n"
            f"open({str(self.calls)!r}, 'a').write(sys.argv[-1] + '\\n')\n"
            f"text = open({str(self.reply)!r}).read()\n"
            "if text.startswith('sleep'):\n"
            "    time.sleep(30)\n"
            "sys.stdout.write(text)\n"
        )
        self.script.chmod(self.script.stat().st_mode | stat.S_IEXEC)

    def answer(self, document: dict[str, Any] | str, **extra: str) -> dict[str, str]:
        """Set the next answer; the environment that configures this observer."""
        text = document if isinstance(document, str) else json.dumps(document)
        self.reply.write_text(text)
        command = json.dumps([sys.executable, str(self.script)])
        return {
            "LEDGER_OBSERVER_COMMAND": command,
            "LEDGER_NOW": NOW,
            "LEDGER_USD_DAILY_CAP": "50",
            **extra,
        }

    def runs(self) -> list[str]:
        """The provider ids the observer was run for, in order."""
        return self.calls.read_text().split() if self.calls.exists() else []


@pytest.fixture
def observer(tmp_path: Path) -> Observer:
    return Observer(tmp_path)


BILL_49 = {"usd_used": 49, "billing_ts": "2026-11-22T11:59:00Z"}


def entries(home: Path) -> list[dict[str, Any]]:
    chain = home / "events.jsonl"
    if not chain.exists():
        return []
    return [json.loads(line) for line in chain.read_text().splitlines()]


def chain_bytes(home: Path) -> bytes:
    chain = home / "events.jsonl"
    return chain.read_bytes() if chain.exists() else b""


class TestRecorded:
    def test_out_of_band_spend_reaches_the_next_verdict(self, home, run_inproc, observer):
        """Spend only the bill knows: allow before the poll, halt-100 at the cap after it."""
        env = observer.answer(BILL_49)
        before = run_inproc(["--home", str(home), "verdict", "2"], env)
        assert before.code == 0, before.stderr
        assert before.json()["verdict"] == "allow"  # the issue: the counter is 0
        assert observer.runs() == []  # below stale_halt_pct the verdict never reads the bill

        polled = run_inproc(["--home", str(home), "poll"], env)
        assert polled.code == 0, polled.stderr
        body = polled.json()
        assert body["status"] == "recorded"
        assert body["recorded"] is True
        assert body["billing_usd"] == 49
        assert body["billing_micros"] == 49_000_000
        assert body["billing_ts"] == "2026-11-22T11:59:00.000000Z"
        assert body["fetched_at"] == "2026-11-22T12:00:00.000000Z"
        last = entries(home)[-1]
        assert last["event_type"] == "budget.observation"
        assert last["payload"]["source"] == "poll"
        assert last["payload"]["usd_used_micros"] == 49_000_000
        assert body["entry_hash"]

        after = run_inproc(["--home", str(home), "verdict", "2"], env)
        assert after.code == 1
        verdict = after.json()
        assert verdict["verdict"] == "halt-100"
        assert verdict["usd_used"] == 49
        assert verdict["billing_api_age_seconds"] == 0
        assert observer.runs() == ["aggregate"]  # the verdict used the poll's reading
        assert run_inproc(["--home", str(home), "verify-chain"], env).code == 0

    def test_a_poll_is_never_a_reconcile(self, home, run_inproc, observer):
        """A bill far from the counter is recorded, not judged: no budget.reconcile, no drift."""
        env = observer.answer({"usd_used": 20, "billing_ts": "2026-11-22T11:59:00Z"})
        assert run_inproc(["--home", str(home), "record", "1", "--provider", "x"], env).code == 0
        assert run_inproc(["--home", str(home), "poll"], env).code == 0
        assert [e["event_type"] for e in entries(home)] == [
            "budget.record_call",
            "budget.observation",
        ]
        verdict = run_inproc(["--home", str(home), "verdict", "1"], env).json()
        assert verdict["verdict"] == "allow"
        assert verdict["usd_used"] == 20

    def test_each_reconciled_provider_is_polled(self, home, run_inproc, observer):
        """Without --provider every id in reconcile.providers is polled, in order."""
        env = observer.answer(BILL_49, LEDGER_RECONCILE_PROVIDERS='["aggregate", "openai"]')
        result = run_inproc(["--home", str(home), "poll"], env)
        assert result.code == 0, result.stderr
        assert [r["provider"] for r in result.json()["results"]] == ["aggregate", "openai"]
        assert observer.runs() == ["aggregate", "openai"]
        observed = [e["payload"]["provider"] for e in entries(home)]
        assert observed == ["aggregate", "openai"]

    def test_provider_option_polls_one(self, home, run_inproc, observer):
        """--provider P polls P only, whatever reconcile.providers says."""
        env = observer.answer(BILL_49)
        result = run_inproc(["--home", str(home), "poll", "--provider", "openai"], env)
        assert result.code == 0, result.stderr
        assert result.json()["provider"] == "openai"
        assert observer.runs() == ["openai"]


class TestNothingWritten:
    @pytest.mark.parametrize(
        ("answer", "status", "reason"),
        [
            ({"_defer": True, "_reason": "rate_limited"}, "defer", "rate_limited"),
            ({"_unreachable": True, "_reason": "billing API down"}, "unreachable", "down"),
            ("{not json", "unreachable", "invalid JSON"),
        ],
    )
    def test_defer_and_unreachable_exit_2_and_write_nothing(
        self, home, run_inproc, observer, answer, status, reason
    ):
        """A poll records successful readings only; anything else leaves the chain as it was."""
        env = observer.answer(BILL_49)
        assert run_inproc(["--home", str(home), "record", "1", "--provider", "x"], env).code == 0
        before = chain_bytes(home)
        env = observer.answer(answer)
        result = run_inproc(["--home", str(home), "poll"], env)
        assert result.code == 2, result.stderr
        body = result.json()
        assert body["status"] == status
        assert body["recorded"] is False
        assert body["entry_hash"] is None
        assert reason in body["reason"]
        assert chain_bytes(home) == before

    def test_observer_timeout_writes_nothing(self, home, observer):
        """An observer killed at observer.timeout_seconds is unreachable: exit 2, no entry."""
        env = clean_env(**observer.answer("sleep", LEDGER_OBSERVER_TIMEOUT_SECONDS="1"))
        before = chain_bytes(home)
        started = time.monotonic()
        result = run_process(["--home", str(home), "poll"], env)
        assert time.monotonic() - started < 10
        assert result.code == 2, result.stderr
        assert result.json()["status"] == "unreachable"
        assert "timed out" in result.json()["reason"] or "timeout" in result.json()["reason"]
        assert chain_bytes(home) == before

    def test_busy_billing_lock_skips_the_poll(self, home, run_inproc, observer):
        """While a reconcile (or another poll) holds the provider's lock, a poll does not wait."""
        env = observer.answer(BILL_49)
        before = chain_bytes(home)
        fd = os.open(home / "billing-aggregate.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            started = time.monotonic()
            result = run_inproc(["--home", str(home), "poll"], env)
            assert time.monotonic() - started < 2
        finally:
            os.close(fd)
        assert result.code == 2, result.stderr
        assert result.json()["status"] == "busy"
        assert observer.runs() == []
        assert chain_bytes(home) == before
        # Other providers have their own lock.
        other = run_inproc(["--home", str(home), "poll", "--provider", "openai"], env)
        assert other.code == 0, other.stderr

    def test_one_failure_among_providers_exits_2(self, home, run_inproc, observer):
        """Every provider is still polled; the exit code says one was not recorded."""
        env = observer.answer(
            {"openai": {"_defer": True, "_reason": "later"}, "aggregate": BILL_49},
            LEDGER_RECONCILE_PROVIDERS='["aggregate", "openai"]',
        )
        # The reply file maps providers to answers only through file_observer.py;
        # this observer prints the file as is, so use the shipped one here.
        env["LEDGER_OBSERVER_COMMAND"] = json.dumps(
            [sys.executable, str(Path(__file__).parents[2] / "observers" / "file_observer.py"),
             "--file", str(observer.reply)]
        )  # fmt: skip
        result = run_inproc(["--home", str(home), "poll"], env)
        assert result.code == 2, result.stderr
        statuses = {r["provider"]: r["status"] for r in result.json()["results"]}
        assert statuses == {"aggregate": "recorded", "openai": "defer"}
        assert [e["payload"]["provider"] for e in entries(home)] == ["aggregate"]


class TestCommandLine:
    def test_bad_provider_is_a_usage_error(self, home, run_inproc, observer):
        """A provider id that does not match the pattern exits 2 before anything runs."""
        env = observer.answer(BILL_49)
        result = run_inproc(["--home", str(home), "poll", "--provider", "Open AI"], env)
        assert result.code == 2
        assert result.stderr.startswith("ledger: --provider")
        assert observer.runs() == []

    def test_poll_seconds_in_the_file_is_validated(self, home, run_inproc, observer):
        """billing.poll_seconds = 1.5 is a config error (78) naming the key."""
        config = home / "ledger.toml"
        text = config.read_text()
        assert "poll_seconds = 240" in text  # `ledger init` writes the default
        config.write_text(text.replace("poll_seconds = 240", "poll_seconds = 1.5"))
        env = observer.answer(BILL_49)
        for command in (["poll"], ["verdict", "1"]):
            result = run_inproc(["--home", str(home), *command], env)
            assert result.code == 78, (command, result.stderr)
            assert "billing.poll_seconds" in result.stderr
        del env["LEDGER_NOW"]  # the daemon refuses LEDGER_NOW before reading the config
        daemon = run_process(["--home", str(home), "daemon"], clean_env(**env), timeout=20)
        assert daemon.code == 78
        assert "billing.poll_seconds" in daemon.stderr

    @pytest.mark.parametrize("value", ["-1", "2.5", "soon"])
    def test_poll_seconds_from_the_environment_is_validated(
        self, home, run_inproc, observer, value
    ):
        """A bad LEDGER_BILLING_POLL_SECONDS is a config error (78) naming the variable."""
        env = observer.answer(BILL_49, LEDGER_BILLING_POLL_SECONDS=value)
        result = run_inproc(["--home", str(home), "poll"], env)
        assert result.code == 78
        assert "LEDGER_BILLING_POLL_SECONDS" in result.stderr
