"""Battery: cut streams x routes x cut points through one real `ledger proxy` each.

For every route (Messages, Chat Completions, Responses) and every point a
stream can be cut (the client hanging up after each event, with no drain and
with the default drain; the upstream dropping the connection; a final event
over 16 MiB; a final event of bad JSON), the call's record is never below the
usage the gateway received, nor below the estimate when the final usage never
arrived; a drained call is recorded at its full usage.
"""

import time
from pathlib import Path

import httpx
import pytest

from tests.batteries.common import summary
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
    start_upstream,
    stream_body,
    stream_headers,
    write_config,
)

pytestmark = pytest.mark.timeout(900)
EVENTS, FULL, ESTIMATE = STREAM_EVENTS, STREAM_FULL_MICROS, STREAM_ESTIMATE_MICROS
# Usage reported before the final event: Messages' message_start (input, 1 output token).
RECEIVED_EARLY = {"messages": micros("anthropic/claude-test", 1000, 1)}


def _wait_records(home: Path, count: int) -> list[dict[str, object]]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = records(home)
        if len(found) >= count:
            return found
        time.sleep(0.02)
    raise AssertionError(f"{count} records never came: {records(home)}")


def _hang_up(proxy: Proxy, upstream: Upstream, kind: str, name: str, after: int) -> None:
    path, _ = STREAM_ROUTES[kind]
    with httpx.Client(timeout=60) as client:
        request = client.build_request(
            "POST", f"{proxy.url}{path}", content=stream_body(kind),
            headers={**stream_headers(kind), "x-test-scenario": f"pause:{name}"},
        )  # fmt: skip
        response = client.send(request, stream=True)
        try:
            upstream.release(name, after - 1)
            seen = 0
            for line in response.iter_lines():
                seen += line.startswith("data:")
                if seen == after:
                    break
        finally:
            response.close()


def _went_away(proxy: Proxy) -> int:
    return sum("went away before the end" in line for line in list(proxy.lines))


def test_cut_streams_are_never_recorded_below_what_they_used(home: Path, capsys) -> None:
    upstream = start_upstream()
    cases: list[tuple[str, str, int]] = []  # (route, cut point, least allowed micros)
    drained: list[str] = []
    try:
        write_config(home, upstream.url, extra="[proxy]\ndrain_seconds = 0\n")
        proxy = start_proxy(home, "--listen", "127.0.0.1:0")
        try:
            for kind, total in EVENTS.items():
                for after in range(1, total):  # before the last event: no final usage
                    name = f"{kind}-{after}"
                    _hang_up(proxy, upstream, kind, name, after)
                    floor = max(ESTIMATE[kind], RECEIVED_EARLY.get(kind, 0))
                    cases.append((kind, f"client after {after}, no drain", floor))
                    _wait_records(home, len(cases))
                    upstream.release(name, total)
                for scenario in ("cut", "huge", "badjson"):
                    path, _ = STREAM_ROUTES[kind]
                    httpx.post(f"{proxy.url}{path}", content=stream_body(kind), timeout=120,
                               headers={**stream_headers(kind), "x-test-scenario": scenario})  # fmt: skip
                    floor = max(ESTIMATE[kind], RECEIVED_EARLY.get(kind, 0))
                    cases.append((kind, scenario, floor))
                    _wait_records(home, len(cases))
        finally:
            assert proxy.stop() == 0, proxy.lines
        # The default drain: hung up anywhere before the end, read on to the full usage.
        write_config(home, upstream.url)
        proxy = start_proxy(home, "--listen", "127.0.0.1:0")
        try:
            for kind, total in EVENTS.items():
                for after in range(1, total):
                    name = f"drain-{kind}-{after}"
                    _hang_up(proxy, upstream, kind, name, after)
                    drained.append(kind)
                    while _went_away(proxy) < len(drained):
                        time.sleep(0.02)
                    upstream.release(name, total)
                    cases.append((kind, f"client after {after}, drained", FULL[kind]))
                    _wait_records(home, len(cases))
        finally:
            assert proxy.stop() == 0, proxy.lines
    finally:
        upstream.stop()
    spent = [int(record["actual_micros"]) for record in records(home)]
    assert len(spent) == len(cases)
    failures = [
        (kind, point, least, got)
        for (kind, point, least), got in zip(cases, spent, strict=True)
        if got < least or (point.endswith("drained") and got != least)
    ]
    summary(
        capsys, "cut-streams", len(cases) - len(failures), len(failures),
        f"{len(EVENTS)} routes x cut points: client hang-ups with and without drain, "
        f"upstream cut, 17 MiB final event, bad JSON final event; {len(drained)} drained",
    )  # fmt: skip
    assert failures == []
