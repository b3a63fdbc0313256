"""Through `ledger proxy`: what the estimate does not understand counts as the most it could cost.

One regression test per way a request was estimated below what the provider
bills: each burst of concurrent calls goes to the fake provider in its
``bill`` scenario (it bills what the provider's documentation says, and
answers at the whole output limit), and the spend recorded never passes the
cap. Beside them: bad text is a 400 or an estimate, never a 500; Gemini's
JSON-array stream passes chunk by chunk; a chat stream's usage is asked for.
"""

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.gateway.helpers import (
    ANTHROPIC_HEADERS,
    OPENAI_HEADERS,
    Proxy,
    Upstream,
    micros,
    records,
    start_proxy,
    write_config,
)
from tests.helpers.documents import blank_pdf_base64

pytestmark = pytest.mark.timeout(240)
BILL = {"x-test-scenario": "bill"}
GEMINI_HEADERS = {"x-goog-api-key": "AIza-test", **BILL}


def _proxy(home: Path, upstream: Upstream, cap: str, extra: str = "") -> Proxy:
    write_config(home, upstream.url, cap, extra)
    return start_proxy(home, "--listen", "127.0.0.1:0")


def _burst(proxy: Proxy, path: str, bodies: list[bytes], headers: dict[str, str]) -> list[int]:
    def one(body: bytes) -> int:
        return httpx.post(
            f"{proxy.url}{path}", content=body, headers=headers, timeout=120
        ).status_code

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(one, bodies))


def _spent(home: Path) -> int:
    return sum(int(record["actual_micros"]) for record in records(home))


def _claude(content: object, **extra: object) -> bytes:
    body = {"model": "claude-test", "max_tokens": 1000,
            "messages": [{"role": "user", "content": content}], **extra}  # fmt: skip
    return json.dumps(body).encode()


def test_a_snake_case_gemini_burst_stays_under_the_cap(home, upstream):
    """Six 1.08 MB system_instruction calls at once on a $1 cap: once $4.06, now ≤ $1."""
    body = {"system_instruction": {"parts": [{"text": "x" * 1_080_000}]},
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generation_config": {"max_output_tokens": 1000}}  # fmt: skip
    proxy = _proxy(home, upstream, "1")
    try:
        path = "/v1beta/models/gemini-test:generateContent"
        statuses = _burst(proxy, path, [json.dumps(body).encode()] * 6, GEMINI_HEADERS)
    finally:
        assert proxy.stop() == 0, proxy.lines
    assert set(statuses) <= {200, 402}
    assert 200 in statuses
    assert _spent(home) <= 1_000_000
    for record in records(home):  # each admitted call billed its whole system prompt
        assert record["actual_micros"] >= micros("google/gemini-test", 360_000, 1000)


def test_a_web_fetch_burst_is_bounded_by_its_uses_and_the_window(home, upstream):
    """Eight web_fetch calls at once: max_uses written, fetched pages sized as the window."""
    body = _claude("read https://example.com", tools=[{"type": "web_fetch_20250910",
                                                       "name": "web_fetch"}])  # fmt: skip
    proxy = _proxy(home, upstream, "20")
    try:
        statuses = _burst(proxy, "/v1/messages", [body] * 8, {**ANTHROPIC_HEADERS, **BILL})
    finally:
        assert proxy.stop() == 0, proxy.lines
    assert 0 < statuses.count(200) < 8
    assert _spent(home) <= 20_000_000
    for sent in upstream.requests():
        assert json.loads(sent["body"])["tools"][0]["max_uses"] == 5


def test_a_pdf_burst_counts_pages_not_bytes(home, upstream):
    """Six 100-page PDFs at once: each billed ≥ 150,000 tokens; the spend stays under the cap."""
    document = {"type": "document", "source": {"type": "base64",
                "media_type": "application/pdf", "data": blank_pdf_base64(100)}}  # fmt: skip
    proxy = _proxy(home, upstream, "3")
    try:
        statuses = _burst(proxy, "/v1/messages", [_claude([document])] * 6,
                          {**ANTHROPIC_HEADERS, **BILL})  # fmt: skip
    finally:
        assert proxy.stop() == 0, proxy.lines
    assert 200 in statuses
    assert 402 in statuses
    assert _spent(home) <= 3_000_000


def test_forty_clamped_calls_with_tools_never_pass_the_cap(home, upstream):
    """40 calls asking 32k output, with a tool, at once on $1: the clamp leaves room for framing."""
    tool = {
        "name": "read",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    body = json.loads(_claude("go on", tools=[tool]))
    body["max_tokens"] = 32_000
    proxy = _proxy(home, upstream, "1")
    try:
        statuses = _burst(proxy, "/v1/messages", [json.dumps(body).encode()] * 40,
                          {**ANTHROPIC_HEADERS, **BILL})  # fmt: skip
    finally:
        assert proxy.stop() == 0, proxy.lines
    assert statuses.count(200) >= 2
    assert _spent(home) <= 1_000_000


@pytest.mark.parametrize("text", ["\\ud83d", "a\\u0000b", "\\udc00\\ud83d"])
def test_text_utf8_cannot_carry_is_estimated_never_a_500(home, upstream, text):
    """A lone surrogate (a client's truncation leaves one) is estimated and sent as its escape."""
    raw = ('{"model": "claude-test", "max_tokens": 10, '
           f'"messages": [{{"role": "user", "content": "{text}"}}]}}').encode()  # fmt: skip
    invalid = b'{"model": "claude-test", "max_tokens": 10, "messages": "\\q"}'
    proxy = _proxy(home, upstream, "100")
    try:
        sent = httpx.post(f"{proxy.url}/v1/messages", content=raw, headers=ANTHROPIC_HEADERS)
        refused = httpx.post(f"{proxy.url}/v1/messages", content=invalid, headers=ANTHROPIC_HEADERS)
    finally:
        assert proxy.stop() == 0, proxy.lines
    assert sent.status_code == 200, sent.text
    assert refused.status_code == 400
    assert refused.json()["type"] == "error"
    assert not any("Traceback" in line for line in proxy.lines)
    assert len(records(home)) == 1


def test_a_gemini_json_array_stream_passes_chunk_by_chunk(home, upstream):
    """streamGenerateContent without alt=sse: the first element reaches the client at once."""
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"maxOutputTokens": 1000}}  # fmt: skip
    headers = {"x-goog-api-key": "AIza-test", "x-test-scenario": "array:g"}
    proxy = _proxy(home, upstream, "100")
    try:
        url = f"{proxy.url}/v1beta/models/gemini-test:streamGenerateContent"
        with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as response:
            chunks = response.iter_raw()
            first = next(chunks)
            assert first.startswith(b"[")
            assert b'"hel"' in first
            assert records(home) == []  # the rest has not been sent yet
            upstream.release("g", 2)
            rest = b"".join(chunks)
    finally:
        assert proxy.stop() == 0, proxy.lines
    whole = json.loads(first + rest)
    assert whole[-1]["candidates"][0]["finishReason"] == "STOP"
    (record,) = records(home)
    assert record["idempotency_key"].startswith("google:gemini")


def test_a_chat_stream_gets_include_usage_and_its_record_is_exact(home, upstream):
    """The gateway asks for the usage chunk; the client, who did not, never sees it."""
    body = {"model": "gpt-test", "max_completion_tokens": 1000, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    proxy = _proxy(home, upstream, "100")
    try:
        with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json=body,
                          headers=OPENAI_HEADERS, timeout=60) as response:  # fmt: skip
            text = response.read().decode()
    finally:
        assert proxy.stop() == 0, proxy.lines
    assert "data: [DONE]" in text
    assert '"usage"' not in text
    (sent,) = upstream.requests()
    assert json.loads(sent["body"])["stream_options"] == {"include_usage": True}
    (record,) = records(home)
    assert record["actual_micros"] == micros("openai/gpt-test", 2000, 500)
