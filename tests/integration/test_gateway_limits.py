"""The output limits the gateway sets: a default for requests without one, and the clamp."""

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.helpers import (
    ANTHROPIC_HEADERS,
    Proxy,
    Upstream,
    micros,
    start_proxy,
    start_upstream,
    verdicts,
    write_config,
)

pytestmark = pytest.mark.timeout(120)
OPENAI_HEADERS = {"authorization": "Bearer sk-test"}


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = start_upstream()
    yield server
    server.stop()


def _proxy(home: Path, upstream: Upstream, cap_usd: str = "100", extra: str = "") -> Proxy:
    write_config(home, upstream.url, cap_usd=cap_usd, extra=extra)
    return start_proxy(home, "--listen", "127.0.0.1:0")


def _sent(upstream: Upstream) -> list[dict[str, object]]:
    return [json.loads(str(request["body"])) for request in upstream.requests()]


class TestDefaultOutputLimit:
    def test_a_messages_request_without_max_tokens_gets_32000(self, home, upstream):
        """Forwarded with max_tokens 32000, and estimated at it: no longer refused."""
        proxy = _proxy(home, upstream)
        try:
            body = {"model": "claude-test", "messages": [{"role": "user", "content": "hi"}]}
            response = httpx.post(f"{proxy.url}/v1/messages", json=body, headers=ANTHROPIC_HEADERS)
        finally:
            assert proxy.stop() == 0
        assert response.status_code == 200, response.text
        assert _sent(upstream)[0]["max_tokens"] == 32_000
        (verdict,) = verdicts(home)
        assert verdict["payload"]["max_output_tokens"] == 32_000
        assert verdict["payload"]["estimated_micros"] == micros("anthropic/claude-test", 1, 32_000)

    def test_the_default_is_proxy_default_max_output_tokens(self, home, upstream):
        """Chat Completions gets max_completion_tokens, Responses max_output_tokens, per n choice."""
        proxy = _proxy(home, upstream, extra="[proxy]\ndefault_max_output_tokens = 5000\n")
        try:
            chat = {"model": "gpt-test", "n": 2, "messages": [{"role": "user", "content": "hi"}]}
            first = httpx.post(
                f"{proxy.url}/v1/chat/completions", json=chat, headers=OPENAI_HEADERS
            )
            codex = {"model": "gpt-test", "input": "hi", "store": False, "stream": False}
            second = httpx.post(f"{proxy.url}/v1/responses", json=codex, headers=OPENAI_HEADERS)
        finally:
            assert proxy.stop() == 0
        assert (first.status_code, second.status_code) == (200, 200)
        sent_chat, sent_codex = _sent(upstream)
        assert sent_chat["max_completion_tokens"] == 5000
        assert "max_tokens" not in sent_chat
        assert sent_codex["max_output_tokens"] == 5000
        chat_verdict, codex_verdict = verdicts(home)
        assert chat_verdict["payload"]["max_output_tokens"] == 10_000
        assert codex_verdict["payload"]["max_output_tokens"] == 5000

    def test_a_stated_limit_is_forwarded_unchanged(self, home, upstream):
        """A request that states its limit is sent byte for byte as it came."""
        proxy = _proxy(home, upstream)
        raw = b'{"model": "claude-test", "max_tokens": 77,  "messages": []}'
        try:
            response = httpx.post(
                f"{proxy.url}/v1/messages", content=raw, headers=ANTHROPIC_HEADERS
            )
        finally:
            assert proxy.stop() == 0
        assert response.status_code == 200
        assert upstream.requests()[0]["body"] == raw.decode()
