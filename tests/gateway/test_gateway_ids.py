"""Ids a caller picks at the gateway: printable and at most 128 characters, else a 400.

The 400 is in the provider's shape, with nothing sent upstream and nothing
reserved (on the command line and in the Python API: ``tests/integration/test_ids.py``).
"""

import httpx
import pytest

from tests.gateway.helpers import ANTHROPIC_HEADERS, anthropic_body, chain

TOO_LONG = "s" * 129


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
