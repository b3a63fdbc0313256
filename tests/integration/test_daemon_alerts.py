"""`ledger daemon` sends alerts: a real daemon process, a real local webhook server.

The daemon runs on the real clock, so verdicts here run on it too; the tests
hold for any date and time (no ``LEDGER_NOW``, nothing compared with a date).
"""

import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.conftest import clean_env, run_process
from tests.integration.test_daemon import Lines
from tests.integration.test_daemon_poll import daemon as run_daemon


class Webhook:
    """A local HTTP endpoint that records each POSTed JSON body; may fail the first tries."""

    def __init__(self, failures: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.paths: list[str] = []
        self.authorizations: list[str | None] = []
        self.failures = failures
        self.received = threading.Condition()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                with hook.received:
                    status = 500 if hook.failures > 0 else 200
                    hook.failures -= 1
                    hook.bodies.append(body)
                    hook.statuses.append(status)
                    hook.paths.append(self.path)
                    hook.authorizations.append(self.headers.get("Authorization"))
                    hook.received.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int, timeout: float = 30) -> list[dict[str, Any]]:
        with self.received:
            self.received.wait_for(lambda: len(self.bodies) >= count, timeout)
            return list(self.bodies)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def webhook(failures: int = 0) -> Iterator[Webhook]:
    hook = Webhook(failures)
    try:
        yield hook
    finally:
        hook.close()


class Trickle:
    """A local HTTP endpoint that takes a POST, then answers one byte a second, forever."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.requests = 0
        trickle = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                trickle.requests += 1
                for byte in b"HTTP/1.1 200 OK\r\n" * 1000:
                    if trickle.stopped.is_set():
                        return
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except OSError:
                        return
                    time.sleep(1)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@contextmanager
def trickling() -> Iterator[Trickle]:
    slow = Trickle()
    try:
        yield slow
    finally:
        slow.stopped.set()
        slow.server.shutdown()
        slow.server.server_close()


def daemon(home: Path, env: dict[str, str]) -> AbstractContextManager[Lines]:
    """A real ``ledger daemon --no-serve``: alerts need no resident gate."""
    return run_daemon(home, env, "--no-serve")


def alert_env(url: str, on: list[str] | None = None) -> dict[str, str]:
    rule: dict[str, Any] = {"url": url}
    if on is not None:
        rule["on"] = on
    return clean_env(
        LEDGER_USD_DAILY_CAP="10",
        LEDGER_BILLING_STALE_HALT_PCT="100",
        LEDGER_ALERTS=json.dumps([rule]),
        LEDGER_ALERTS_CHECK_SECONDS="1",
        LEDGER_NO_SERVER="1",
    )


def verdict(home: Path, env: dict[str, str], usd: str) -> int:
    return run_process(["--home", str(home), "verdict", usd], env).code


def test_a_halt_and_a_warning_are_each_sent_once_per_budget_day(home: Path):
    with webhook() as hook:
        env = alert_env(hook.url)
        with daemon(home, env) as lines:
            # The first run starts at the head: nothing before the daemon is news.
            assert lines.wait_for("started")
            assert verdict(home, env, "9.5") == 0  # warn-90
            first = hook.wait_for(1)
            assert first[0]["event"] == "warn"
            assert verdict(home, env, "1") == 1  # halt-100
            assert verdict(home, env, "2") == 1  # halt-100 again, same day: no new alert
            bodies = hook.wait_for(2)
            assert [b["event"] for b in bodies] == ["warn", "halt"]
            assert bodies[1]["scope"] == "aggregate"
            assert "$0.00 used + $9.50 reserved of cap $10.00; this call $1.00" in bodies[1]["text"]
            assert len(bodies[1]["verdict_ref"]) == 64
            # One more check interval or two: still nothing new.
            assert lines.wait_for("alert sent", count=2)
            assert verdict(home, env, "3") == 1
            assert not lines.wait_for("alert sent", count=3, timeout=3)
        assert len(hook.bodies) == 2
        # A restarted daemon remembers what it sent.
        with daemon(home, env) as lines:
            assert verdict(home, env, "4") == 1
            assert not lines.wait_for("alert sent", timeout=3)
        assert len(hook.bodies) == 2


def test_a_failed_delivery_is_retried_until_it_is_taken(home: Path):
    with webhook(failures=1) as hook:
        env = alert_env(hook.url, on=["halt"])
        with daemon(home, env) as lines:
            assert verdict(home, env, "9.5") == 0  # a warning: not asked for
            assert verdict(home, env, "1") == 1
            bodies = hook.wait_for(2)
            assert lines.wait_for("alert sent")
        assert hook.statuses[:2] == [500, 200]
        assert bodies[0] == bodies[1]
        assert bodies[0]["event"] == "halt"
        assert any("retrying in 1 s" in line for line in lines.lines)


def test_an_edited_chain_is_sent_as_broken(home: Path):
    with webhook() as hook:
        env = alert_env(hook.url, on=["broken"])
        assert verdict(home, env, "1") == 0
        with daemon(home, env) as lines:
            assert lines.wait_for("started")
            assert verdict(home, env, "1") == 0
            chain = home / "events.jsonl"
            lines_now = chain.read_bytes().splitlines(keepends=True)
            # Append a copy of an earlier line: its prev_hash no longer links.
            with chain.open("ab") as handle:
                handle.write(lines_now[0])
            bodies = hook.wait_for(1)
        assert bodies[0]["event"] == "broken"
        assert f"line {len(lines_now) + 1}" in bodies[0]["text"]


def test_a_trickling_webhook_holds_back_no_other_and_no_log_shows_a_secret(home: Path):
    """One deadline per POST; the healthy webhook gets every alert; URLs are logged redacted."""
    with trickling() as slow, webhook() as hook:
        port = hook.url.split(":")[2].split("/")[0]
        secret = f"http://alice:s3cret@127.0.0.1:{port}/hook/T000/B000/XXsecretXX?token=abc"
        env = alert_env(hook.url)
        env["LEDGER_ALERTS"] = json.dumps(
            [{"url": f"http://127.0.0.1:{slow.port}/slow/path"}, {"url": secret}]
        )
        # The slow webhook trickles for ever, so any deadline proves the point; 5 s
        # leaves a healthy POST room on a loaded machine (its deadline is the same).
        env["LEDGER_ALERTS_TIMEOUT_SECONDS"] = "5"
        with daemon(home, env) as lines:
            assert verdict(home, env, "9.5") == 0  # warn-90
            assert hook.wait_for(1, timeout=90)
            assert verdict(home, env, "1") == 1  # halt-100
            bodies = hook.wait_for(2, timeout=90)
            assert [b["event"] for b in bodies] == ["warn", "halt"]
            assert lines.wait_for(f"alert to http://127.0.0.1:{slow.port}/… failed (no answer")
            assert lines.wait_for(f"alert sent to http://127.0.0.1:{port}/…: halt aggregate")
        assert slow.requests >= 2
        expected = "Basic " + base64.b64encode(b"alice:s3cret").decode()
        assert hook.authorizations[:2] == [expected, expected]
        assert hook.paths[0] == "/hook/T000/B000/XXsecretXX?token=abc"
        for secret_part in ("s3cret", "alice", "XXsecretXX", "token", "/hook", "/slow"):
            assert not any(secret_part in line for line in lines.lines), lines.lines


def test_a_line_edited_in_place_is_sealed_and_sent_as_broken(home: Path):
    """The daemon's full verification seals a chain.finding; the follower sends it."""
    with webhook() as hook:
        env = alert_env(hook.url, on=["broken"])
        env["LEDGER_CHAIN_VERIFY_INTERVAL_HOURS"] = "0.001"  # 3.6 s
        assert verdict(home, env, "1") == 0
        assert verdict(home, env, "2") == 0
        chain = home / "events.jsonl"
        with daemon(home, env) as lines:
            assert lines.wait_for("verify: OK")
            # The first verdict's estimate edited in place: same length, same head.
            # Only those bytes are written, so a line the daemon appends meanwhile stays
            # (rewriting the whole file from an earlier read would drop it, and the
            # finding would then be that later line instead of line 1).
            with chain.open("r+b") as handle:
                at = handle.read().index(b'"estimated_micros":1000000')
                handle.seek(at)
                handle.write(b'"estimated_micros":1000001')
            bodies = hook.wait_for(1)
            assert lines.wait_for("verify: BROKEN line 1")
        assert bodies[0]["event"] == "broken"
        assert "line 1 (" in bodies[0]["text"]
        tail = json.loads(chain.read_text().splitlines()[-1])
        assert (tail["event_type"], tail["payload"]["line"]) == ("chain.finding", 1)


def test_where_alerts_start_is_fixed_before_the_daemon_says_it_started(home: Path):
    """A verdict sealed right after "started" is news even if the first check runs late."""
    with webhook() as hook:
        env = alert_env(hook.url)
        assert verdict(home, env, "1") == 0  # before the daemon: not news
        with daemon(home, env) as lines:
            assert lines.wait_for("started")
            started = next(i for i, line in enumerate(lines.lines) if "started:" in line)
            primed = [i for i, line in enumerate(lines.lines) if "following the chain" in line]
            assert primed
            assert primed[0] < started
            assert "after line 1" in lines.lines[primed[0]]
            assert verdict(home, env, "8.5") == 0  # 95 %: warn-90
            assert hook.wait_for(1)[0]["event"] == "warn"
        with daemon(home, env) as lines:  # a saved position is kept, not moved to the end
            assert lines.wait_for("started")
            assert not any("following the chain" in line for line in lines.lines)
