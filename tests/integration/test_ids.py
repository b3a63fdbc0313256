"""Ids a caller picks are printable and at most 128 characters, wherever they enter.

On the command line a bad one is exit 2; in the Python API a ``LedgerError``
with exit code 2; at the gateway a 400 in the provider's shape, with nothing
sent upstream and nothing reserved.
"""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import ledger
from ledger.errors import LedgerError
from tests.gate_helpers import env_at
from tests.gateway.helpers import (
    ANTHROPIC_HEADERS,
    Proxy,
    Upstream,
    anthropic_body,
    chain,
    start_proxy,
    start_upstream,
    write_config,
)

TOO_LONG = "s" * 129
BAD = ["x\x1b]8;;https://evil.example\x07", TOO_LONG, "tab\tin"]


@pytest.mark.parametrize("option", ["--cycle-id", "--agent"])
@pytest.mark.parametrize("value", BAD)
def test_the_command_line_refuses_a_bad_id_with_exit_2(run_inproc, home, option, value):
    result = run_inproc(["--home", str(home), "verdict", "0.01", option, value], env_at())
    assert result.code == 2, result
    assert result.stderr.startswith(f"ledger: {option}: ")
    assert result.stdout == ""


def test_the_command_line_refuses_a_bad_id_on_record_too(run_inproc, home):
    result = run_inproc(["--home", str(home), "record", "0.01", "--cycle-id", TOO_LONG], env_at())
    assert result.code == 2, result


def test_the_python_api_raises_a_ledger_error_with_exit_code_2(home, monkeypatch):
    for name, value in env_at().items():
        monkeypatch.setenv(name, value)
    book = ledger.open(home=home)
    with pytest.raises(LedgerError) as caught:
        book.verdict(estimate_usd="0.01", cycle_id="a\x00b")
    assert caught.value.exit_code == 2


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = start_upstream()
    yield server
    server.stop()


@pytest.fixture
def proxy(home: Path, upstream: Upstream) -> Iterator[Proxy]:
    write_config(home, upstream.url)
    running = start_proxy(home, "--listen", "127.0.0.1:0")
    yield running
    assert running.stop() == 0, running.lines


@pytest.mark.parametrize(
    ("headers", "metadata", "named"),
    [
        ({"x-ledger-session": TOO_LONG}, None, "x-ledger-session"),
        ({"x-ledger-agent": "tab\tin"}, None, "x-ledger-agent"),
        ({}, {"user_id": "<!channel>\x1b[2J"}, "metadata.user_id"),
        ({}, {"user_id": TOO_LONG}, "metadata.user_id"),
    ],
)
def test_the_gateway_answers_400_and_sends_nothing(proxy, upstream, home, headers, metadata, named):
    extra = {} if metadata is None else {"metadata": metadata}
    response = httpx.post(
        f"{proxy.url}/v1/messages", content=anthropic_body(**extra),
        headers={**ANTHROPIC_HEADERS, **headers}, timeout=60,
    )  # fmt: skip
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["message"].startswith(f"ledger: {named}: ")
    assert upstream.requests() == []
    assert not (home / "events.jsonl").exists()  # nothing decided, nothing reserved


def test_a_printable_session_of_128_characters_passes(proxy, home):
    session = "run 42 " + "s" * 121
    response = httpx.post(
        f"{proxy.url}/v1/messages", content=anthropic_body(),
        headers={**ANTHROPIC_HEADERS, "x-ledger-session": session}, timeout=60,
    )  # fmt: skip
    assert response.status_code == 200
    (allowed,) = [e for e in chain(home) if e["event_type"] == "budget.allow"]
    assert allowed["payload"]["cycle_id"] == session
