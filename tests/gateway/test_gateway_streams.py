"""Streams through `ledger proxy`: event by event, recorded once however they end.

The upstream pauses before each event after the first until the test releases
it, so what the client has received while the upstream waits is a fact, not
a race; nothing here is timed.
"""

import contextlib
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ledger.edges.locks import exclusive_lock
from ledger.providers import anthropic
from tests.gateway.helpers import (
    ANTHROPIC_HEADERS,
    Proxy,
    anthropic_body,
    micros,
    records,
    start_proxy,
    write_config,
)

pytestmark = pytest.mark.timeout(180)
EVENTS_AFTER_FIRST = 5  # an Anthropic stream is six events
RECEIVED_AT_START = micros("anthropic/claude-test", 1000, 1)  # message_start's usage
# One input token ("hi") and its framing, max_tokens 1000: above what message_start reports.
FRAMED_INPUT = 1 + anthropic.REQUEST_TOKENS + anthropic.MESSAGE_TOKENS
ESTIMATE = micros("anthropic/claude-test", FRAMED_INPUT, 1000)


@contextlib.contextmanager
def _stream(proxy: Proxy, scenario: str, model: str = "claude-test") -> Iterator[httpx.Response]:
    with httpx.Client(timeout=60) as client:
        request = client.build_request(
            "POST", f"{proxy.url}/v1/messages", content=anthropic_body(model, stream=True),
            headers={**ANTHROPIC_HEADERS, "x-test-scenario": scenario},
        )  # fmt: skip
        response = client.send(request, stream=True)
        try:
            yield response
        finally:
            response.close()


def _read_until(lines: Iterator[str], needle: str) -> list[str]:
    seen = []
    for line in lines:
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} never came; got {seen}")


class TestPassThrough:
    def test_an_event_reaches_the_client_before_the_upstream_sends_the_next(
        self, proxy, upstream, gateway_home
    ):
        """message_start arrives while the upstream still waits to send anything more."""
        with _stream(proxy, "pause:one") as response:
            lines = response.iter_lines()
            _read_until(lines, '"type": "message_start"')
            # The upstream is blocked before its second event: the first one
            # was not buffered behind it.
            assert records(gateway_home) == []
            upstream.release("one", EVENTS_AFTER_FIRST - 1)
            _read_until(lines, '"type": "message_delta"')
            assert records(gateway_home) == []  # the stream has not ended yet
            upstream.release("one")
            _read_until(lines, '"type": "message_stop"')
            # The final event comes only once its record is durable.
            (record,) = records(gateway_home)
            assert record["actual_micros"] == 13500

    def test_a_stream_sent_in_one_chunk_shows_all_but_its_end_before_the_record(
        self, proxy, upstream, gateway_home
    ):
        """Every event before message_stop reaches the client while the record cannot be made.

        The test holds the chain's lock once the verdict is sealed, so the
        record waits; only the terminal event may wait with it.
        """
        with _stream(proxy, "whole:fast") as response:
            lines = response.iter_lines()
            with exclusive_lock(gateway_home / "events.jsonl.lock", timeout=60):
                upstream.release("fast")
                seen = _read_until(lines, '"type": "message_delta"')
                assert records(gateway_home) == []
            assert not any("message_stop" in line for line in seen)
            _read_until(lines, '"type": "message_stop"')
        (record,) = records(gateway_home)
        assert record["actual_micros"] == 13500

    def test_an_error_event_mid_stream_records_the_usage_received(self, proxy, gateway_home):
        """The error event reaches the client; the input message_start reported is recorded."""
        with _stream(proxy, "error") as response:
            text = response.read().decode()
        assert "event: error" in text
        (record,) = records(gateway_home)
        assert record["actual_micros"] == RECEIVED_AT_START

    def test_a_stream_the_upstream_cuts_records_at_least_its_estimate(self, proxy, gateway_home):
        """A dropped upstream connection leaves one record, never below the estimate."""
        with _stream(proxy, "cut") as response:
            text = response.read().decode()
        assert "message_start" in text
        assert "message_stop" not in text
        (record,) = records(gateway_home)
        assert record["actual_micros"] == max(ESTIMATE, RECEIVED_AT_START)

    def test_a_client_that_closes_early_has_its_usage_recorded(self, gateway_home, upstream):
        """Closing after the first event: the gateway reads on and records the final usage."""
        proxy = start_proxy(gateway_home, "--listen", "127.0.0.1:0")
        try:
            with _stream(proxy, "pause:early") as response:
                _read_until(response.iter_lines(), "message_start")
            upstream.release("early", EVENTS_AFTER_FIRST)
        finally:
            assert proxy.stop() == 0, proxy.lines
        (record,) = records(gateway_home)
        assert record["actual_micros"] == 13500


class TestConcurrency:
    def test_32_streaming_clients_against_a_cap_for_5_make_exactly_5_upstream_calls(
        self, home, upstream
    ):
        """Check and reserve are one step: 5 admitted, 27 answered 402, 5 records."""
        # claude-flat: $0 input, $10 per million output: each call reserves $0.01.
        write_config(home, upstream.url, cap_usd="0.055")
        proxy = start_proxy(home, "--listen", "127.0.0.1:0")
        statuses: list[int] = []
        admitted_ready = threading.Semaphore(0)
        answered = threading.Semaphore(0)
        texts: list[str] = []

        def client() -> None:
            with _stream(proxy, "pause:many", model="claude-flat") as response:
                statuses.append(response.status_code)
                answered.release()
                if response.status_code == 200:
                    lines = response.iter_lines()
                    _read_until(lines, "message_start")
                    admitted_ready.release()
                    texts.append("\n".join(lines))
                else:
                    response.read()

        threads = [threading.Thread(target=client) for _ in range(32)]
        try:
            for thread in threads:
                thread.start()
            for _ in threads:
                assert answered.acquire(timeout=120)
            assert sorted(statuses) == [200] * 5 + [402] * 27
            for _ in range(5):
                assert admitted_ready.acquire(timeout=120)
            assert len(upstream.requests()) == 5
            upstream.release("many", 5 * EVENTS_AFTER_FIRST)
            for thread in threads:
                thread.join(timeout=120)
        finally:
            assert proxy.stop() == 0, proxy.lines
        assert all("message_stop" in text for text in texts)
        spent = [record["actual_micros"] for record in records(home)]
        assert spent == [micros("anthropic/claude-flat", 1000, 700)] * 5
        # Group commit: the 64 decisions and records took fewer fsyncs than that.
        line = proxy.wait_for("stopped after")
        found = re.search(r"after (\d+) decisions and records in (\d+) batches", line)
        assert found is not None
        assert int(found.group(2)) < int(found.group(1)) == 37


def _refuses_connections(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.socket() as probe:
        try:
            probe.connect((host, int(port)))
        except OSError:
            return True
    return False


def test_sigterm_drains_a_stream_in_flight_then_exits_0(gateway_home, upstream):
    """After SIGTERM no new connection is taken, the open stream completes and is recorded."""
    proxy = start_proxy(gateway_home, "--listen", "127.0.0.1:0")
    with _stream(proxy, "pause:drain") as response:
        lines = response.iter_lines()
        _read_until(lines, "message_start")
        proxy.proc.send_signal(signal.SIGTERM)
        while not _refuses_connections(proxy.url):  # the listener closes first
            time.sleep(0.02)
        upstream.release("drain", EVENTS_AFTER_FIRST)
        _read_until(lines, "message_stop")
    assert proxy.stop() == 0, proxy.lines
    (record,) = records(gateway_home)
    assert record["actual_micros"] == 13500


def test_an_upstream_that_stops_answering_times_out_and_records_its_estimate(home, upstream):
    """proxy.upstream_timeout_seconds ends a stalled stream; it costs at least its estimate."""
    write_config(home, upstream.url, extra="[proxy]\nupstream_timeout_seconds = 1\n")
    proxy = start_proxy(home, "--listen", "127.0.0.1:0")
    try:
        with _stream(proxy, "pause:stalled") as response:
            text = response.read().decode()  # the gateway ends it: the upstream never does
        upstream.release("stalled", EVENTS_AFTER_FIRST)
    finally:
        assert proxy.stop() == 0, proxy.lines
    assert "message_start" in text
    assert "message_stop" not in text
    (record,) = records(home)
    assert record["actual_micros"] == max(ESTIMATE, RECEIVED_AT_START)


def test_a_stream_that_cannot_be_recorded_never_shows_its_end(proxy, upstream, gateway_home):
    """The chain tears mid-stream: the record fails, so the final event is withheld."""
    with _stream(proxy, "pause:torn") as response:
        lines = response.iter_lines()
        _read_until(lines, "message_start")
        with (gateway_home / "events.jsonl").open("a") as log:
            log.write('{"schema_version": "1.1.0", "prim')
        upstream.release("torn", EVENTS_AFTER_FIRST)
        rest = "\n".join(lines)
    assert "message_delta" in rest
    assert "message_stop" not in rest
    assert "budget.record_call" not in (gateway_home / "events.jsonl").read_text()
    proxy.wait_for("could not record")


def _sealed_verdicts(home: Path) -> int:
    """Admitting verdicts in the complete lines of the chain (one may be mid-write)."""
    text = (home / "events.jsonl").read_text()
    complete = text[: text.rfind("\n") + 1]
    return complete.count('"event_type":"budget.allow"')


def test_upstream_connections_are_bounded(home, upstream):
    """With proxy.max_upstream_connections = 1, an admitted call waits for the open stream."""
    write_config(home, upstream.url, extra="[proxy]\nmax_upstream_connections = 1\n")
    proxy = start_proxy(home, "--listen", "127.0.0.1:0")
    answers: list[int] = []
    try:
        with _stream(proxy, "pause:bounded") as response:
            lines = response.iter_lines()
            _read_until(lines, "message_start")
            second = threading.Thread(
                target=lambda: answers.append(
                    httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(),
                               headers=ANTHROPIC_HEADERS, timeout=60).status_code
                )
            )  # fmt: skip
            second.start()
            while _sealed_verdicts(home) < 2:  # the second call was admitted
                time.sleep(0.02)
            assert len(upstream.requests()) == 1  # and waits for the one connection
            upstream.release("bounded", EVENTS_AFTER_FIRST)
            _read_until(lines, "message_stop")
        second.join(timeout=60)
    finally:
        assert proxy.stop() == 0, proxy.lines
    assert answers == [200]
    assert len(upstream.requests()) == 2
