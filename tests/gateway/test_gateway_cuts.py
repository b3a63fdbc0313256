"""A cut never makes a call cheaper: streams cut by the client, the upstream or bad data.

Each case runs a real `ledger proxy` against the local upstream, which pauses
before each event after the first until the test releases it, so where a
stream is cut is a fact, not a race. A client that hangs up before the final
usage leaves the gateway reading on (``proxy.drain_seconds``) to record it;
with no drain, an upstream cut, or a final event that cannot be read, the call
is recorded at the larger of its estimate and the usage received.
"""

import contextlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.helpers import (
    STREAM_ESTIMATE_MICROS,
    STREAM_EVENTS,
    STREAM_FULL_MICROS,
    STREAM_ROUTES,
    Proxy,
    Upstream,
    micros,
    records,
    start_proxy,
    stream_body,
    stream_headers,
    write_config,
)

pytestmark = pytest.mark.timeout(300)
ROUTES = list(STREAM_ROUTES)
EVENTS, FULL, ESTIMATE = STREAM_EVENTS, STREAM_FULL_MICROS, STREAM_ESTIMATE_MICROS
# How many of each stream's data events come with or after its final usage.
FINAL = {"messages": 2, "chat_completions": 2, "responses": 1}


@contextlib.contextmanager
def _running(home: Path, upstream: Upstream, extra: str = "") -> Iterator[Proxy]:
    write_config(home, upstream.url, extra=extra)
    proxy = start_proxy(home, "--listen", "127.0.0.1:0")
    try:
        yield proxy
    finally:
        assert proxy.stop() == 0, proxy.lines


def _hang_up_before_final(proxy: Proxy, upstream: Upstream, kind: str, name: str) -> None:
    """Read every event before the final usage, then close the connection."""
    path, _ = STREAM_ROUTES[kind]
    before = EVENTS[kind] - FINAL[kind]
    with httpx.Client(timeout=60) as client:
        request = client.build_request(
            "POST", f"{proxy.url}{path}", content=stream_body(kind),
            headers={**stream_headers(kind), "x-test-scenario": f"pause:{name}"},
        )  # fmt: skip
        response = client.send(request, stream=True)
        try:
            assert response.status_code == 200
            upstream.release(name, before - 1)
            seen = 0
            for line in response.iter_lines():
                seen += line.startswith("data:")
                if seen == before:
                    break
        finally:
            response.close()
    proxy.wait_for("went away before the end")


def _whole_stream(proxy: Proxy, kind: str, scenario: str) -> str:
    path, _ = STREAM_ROUTES[kind]
    response = httpx.post(
        f"{proxy.url}{path}", content=stream_body(kind), timeout=120,
        headers={**stream_headers(kind), "x-test-scenario": scenario},
    )  # fmt: skip
    return response.text


@pytest.mark.parametrize("kind", ROUTES)
def test_a_client_hanging_up_before_the_final_event_is_recorded_at_its_full_usage(
    home, upstream, kind
):
    """The gateway reads the upstream on after the client left, and records the final usage."""
    with _running(home, upstream) as proxy:
        _hang_up_before_final(proxy, upstream, kind, f"drain-{kind}")
        upstream.release(f"drain-{kind}", FINAL[kind])
    (record,) = records(home)
    assert record["actual_micros"] == FULL[kind]


@pytest.mark.parametrize("kind", ROUTES)
def test_without_a_drain_a_hung_up_stream_is_recorded_at_least_at_its_estimate(
    home, upstream, kind
):
    """proxy.drain_seconds = 0: nothing more is read, and the call costs its estimate."""
    with _running(home, upstream, "[proxy]\ndrain_seconds = 0\n") as proxy:
        _hang_up_before_final(proxy, upstream, kind, f"nodrain-{kind}")
        proxy.wait_for("went away")
    (record,) = records(home)
    assert record["actual_micros"] == ESTIMATE[kind]


@pytest.mark.parametrize("scenario", ["cut", "huge", "badjson"])
@pytest.mark.parametrize("kind", ROUTES)
def test_cut_streams_are_never_recorded_below_their_estimate(home, upstream, kind, scenario):
    """Battery: routes x (upstream cut, 17 MiB final event, bad JSON final event)."""
    with _running(home, upstream) as proxy:
        text = _whole_stream(proxy, kind, scenario)
    assert text  # the client got what the upstream sent
    (record,) = records(home)
    assert record["actual_micros"] >= ESTIMATE[kind]
    assert record["actual_micros"] == max(ESTIMATE[kind], _received(kind, scenario))


def _received(kind: str, scenario: str) -> int:
    """The usage that reached the gateway before the cut (message_start's input)."""
    if kind == "messages":
        return micros("anthropic/claude-test", 1000, 1)
    return 0
