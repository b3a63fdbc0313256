"""Input the gateway cannot see is never free: it counts as a full context window.

A PDF by URL, a Files API file id or an unknown previous_response_id is
estimated as if it filled the model's context window (the test models have
no model data, so the documented default applies); a previous_response_id
this gateway recorded counts as that response's input plus output.
"""

import json
from pathlib import Path

import httpx

from ledger.providers import openai
from ledger.services.gate.referenced import DEFAULT_CONTEXT_WINDOW
from tests.gateway.helpers import (
    ANTHROPIC_HEADERS,
    OPENAI_HEADERS,
    Proxy,
    Upstream,
    micros,
    records,
    start_proxy,
    verdicts,
    write_config,
)

URL_PDF = {"type": "document", "source": {"type": "url", "url": "https://x.example/a.pdf"}}


def _proxy(home: Path, upstream: Upstream, cap_usd: str) -> Proxy:
    write_config(home, upstream.url, cap_usd=cap_usd)
    return start_proxy(home, "--listen", "127.0.0.1:0")


def _pdf_by_url() -> bytes:
    content = [URL_PDF, {"type": "text", "text": "hi"}]
    return json.dumps({"model": "claude-test", "max_tokens": 10,
                       "messages": [{"role": "user", "content": content}]}).encode()  # fmt: skip


def _responses(**fields: object) -> bytes:
    body = {"model": "gpt-test", "max_output_tokens": 10, "input": "hi", **fields}
    return json.dumps(body).encode()


def test_a_pdf_by_url_is_estimated_at_the_context_window_and_halts_on_a_small_cap(home, upstream):
    """$3 per million input tokens × the default window is over a $1 cap: 402, not sent."""
    proxy = _proxy(home, upstream, "1")
    try:
        response = httpx.post(f"{proxy.url}/v1/messages", content=_pdf_by_url(),
                              headers=ANTHROPIC_HEADERS, timeout=60)  # fmt: skip
    finally:
        assert proxy.stop() == 0, proxy.lines
    assert response.status_code == 402
    assert upstream.requests() == []
    (halt,) = verdicts(home)
    assert halt["payload"]["estimated_micros"] >= micros(
        "anthropic/claude-test", DEFAULT_CONTEXT_WINDOW, 10
    )


def test_a_previous_response_recorded_here_counts_its_input_and_output(home, upstream):
    """resp_000001 used 3,000 + 900 tokens: the follow-up's input estimate includes them."""
    proxy = _proxy(home, upstream, "100")
    try:
        first = httpx.post(f"{proxy.url}/v1/responses", content=_responses(),
                           headers=OPENAI_HEADERS, timeout=60)  # fmt: skip
        first_id = first.json()["id"]
        follow = httpx.post(
            f"{proxy.url}/v1/responses", content=_responses(previous_response_id=first_id),
            headers=OPENAI_HEADERS, timeout=60,
        )  # fmt: skip
        unknown = httpx.post(
            f"{proxy.url}/v1/responses", content=_responses(previous_response_id="resp_elsewhere"),
            headers=OPENAI_HEADERS, timeout=60,
        )  # fmt: skip
    finally:
        assert proxy.stop() == 0, proxy.lines
    assert [first.status_code, follow.status_code, unknown.status_code] == [200, 200, 200]
    estimates = [entry["payload"]["estimated_micros"] for entry in verdicts(home)]
    frame = openai.REQUEST_TOKENS  # the request's own framing
    assert estimates == [
        micros("openai/gpt-test", 1 + frame, 10),
        micros("openai/gpt-test", 1 + frame + 3000 + 900, 10),
        micros("openai/gpt-test", DEFAULT_CONTEXT_WINDOW, 10),
    ]
    assert len(records(home)) == 3
