"""The output limits the gateway sets: a default for requests without one, and the clamp."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from ledger.providers import anthropic
from tests.conftest import clean_env
from tests.gateway.helpers import (
    ANTHROPIC_HEADERS,
    NOW,
    Proxy,
    Upstream,
    micros,
    start_proxy,
    verdicts,
    write_config,
)

# "hi" and the framing Anthropic adds to a request and its one message.
HI_INPUT = 1 + anthropic.REQUEST_TOKENS + anthropic.MESSAGE_TOKENS

pytestmark = pytest.mark.timeout(120)
OPENAI_HEADERS = {"authorization": "Bearer sk-test"}


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
        assert verdict["payload"]["estimated_micros"] == micros(
            "anthropic/claude-test", HI_INPUT, 32_000
        )

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


def _spend(home: Path, usd: str) -> None:
    """Spend recorded before the test's calls (as an earlier call's record)."""
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), "record", usd,
         "--provider", "anthropic"],
        env=clean_env(LEDGER_NOW=NOW), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


CLAUDE_CODE = {
    "model": "claude-test",
    "max_tokens": 32_000,
    "thinking": {"type": "enabled", "budget_tokens": 31_999},
    "messages": [{"role": "user", "content": "hi"}],
}
# "hi" is 1 input token ($3 per million): what is left of the cap, less that and
# one micro-USD (reaching 100 % halts), over $15 per million output tokens.
INPUT_MICROS = micros("anthropic/claude-test", HI_INPUT, 0)


def _fitting(room_micros: int) -> int:
    return (room_micros - 1 - INPUT_MICROS) // 15


class TestClamp:
    def test_claude_codes_32000_on_a_nearly_used_cap_is_clamped(self, home, upstream):
        """$0.70 of $1 spent: sent with the most output that fits, marked x-ledger-clamped."""
        proxy = _proxy(home, upstream, cap_usd="1")
        _spend(home, "0.70")
        try:
            response = httpx.post(
                f"{proxy.url}/v1/messages", json=CLAUDE_CODE, headers=ANTHROPIC_HEADERS
            )
        finally:
            assert proxy.stop() == 0
        limit = _fitting(300_000)
        assert response.status_code == 200, response.text
        assert response.headers["x-ledger-clamped"] == str(limit)
        (sent,) = _sent(upstream)
        assert sent["max_tokens"] == limit
        assert sent["thinking"] == {"type": "enabled", "budget_tokens": limit - 1}
        (verdict,) = verdicts(home)
        assert verdict["event_type"] == "budget.warn_90"
        assert verdict["payload"]["max_output_tokens"] == limit
        estimate = micros("anthropic/claude-test", HI_INPUT, limit)
        assert verdict["payload"]["estimated_micros"] == estimate
        assert verdict["payload"]["reservation"]["micros"] == estimate
        assert estimate < 300_000

    def test_a_request_that_fits_is_not_clamped(self, home, upstream):
        """With room for the whole limit, nothing is changed and no header is added."""
        proxy = _proxy(home, upstream, cap_usd="1")
        try:
            response = httpx.post(
                f"{proxy.url}/v1/messages", json=CLAUDE_CODE, headers=ANTHROPIC_HEADERS
            )
        finally:
            assert proxy.stop() == 0
        assert response.status_code == 200
        assert "x-ledger-clamped" not in response.headers
        assert _sent(upstream)[0]["max_tokens"] == 32_000

    def test_below_min_output_tokens_halts(self, home, upstream):
        """When not even proxy.min_output_tokens fits, the call halts as before."""
        proxy = _proxy(home, upstream, cap_usd="1", extra="[proxy]\nmin_output_tokens = 4000\n")
        _spend(home, "0.95")  # room for 3,333 output tokens
        try:
            response = httpx.post(
                f"{proxy.url}/v1/messages", json=CLAUDE_CODE, headers=ANTHROPIC_HEADERS
            )
        finally:
            assert proxy.stop() == 0
        assert response.status_code == 402
        assert upstream.requests() == []

    def test_proxy_clamp_false_halts_instead(self, home, upstream):
        """With the clamp off, a request that does not fit is refused 402 and not sent."""
        proxy = _proxy(home, upstream, cap_usd="1", extra="[proxy]\nclamp = false\n")
        _spend(home, "0.70")
        try:
            response = httpx.post(
                f"{proxy.url}/v1/messages", json=CLAUDE_CODE, headers=ANTHROPIC_HEADERS
            )
        finally:
            assert proxy.stop() == 0
        assert response.status_code == 402
        assert response.json()["error"]["type"] == "budget_exceeded"
        assert upstream.requests() == []

    def test_a_second_request_in_flight_gets_what_is_left(self, home, upstream):
        """A title request holds its reservation; the session's first prompt is clamped, not refused."""
        proxy = _proxy(home, upstream, cap_usd="0.60")
        body = {**CLAUDE_CODE, "stream": True}
        headers = {**ANTHROPIC_HEADERS, "x-test-scenario": "pause:title"}
        try:
            with httpx.Client(timeout=60) as client:
                request = client.build_request(
                    "POST", f"{proxy.url}/v1/messages", json=body, headers=headers
                )
                title = client.send(request, stream=True)
                try:
                    lines = title.iter_lines()
                    next(line for line in lines if "message_start" in line)
                    # The first call is in flight, its $0.48 estimate reserved.
                    prompt = httpx.post(
                        f"{proxy.url}/v1/messages", json=CLAUDE_CODE, headers=ANTHROPIC_HEADERS
                    )
                    upstream.release("title", 5)
                    rest = list(lines)
                finally:
                    title.close()
        finally:
            assert proxy.stop() == 0
        first_estimate = micros("anthropic/claude-test", HI_INPUT, 32_000)
        limit = _fitting(600_000 - first_estimate)
        assert any("message_stop" in line for line in rest)
        assert prompt.status_code == 200, prompt.text
        assert prompt.headers["x-ledger-clamped"] == str(limit)
        reserved = [v["payload"]["reservation"]["micros"] for v in verdicts(home)]
        assert reserved == [first_estimate, micros("anthropic/claude-test", HI_INPUT, limit)]
        assert sum(reserved) < 600_000


def test_a_websocket_upgrade_on_a_gated_path_is_426_at_once(home, upstream):
    """Codex's WebSocket attempt on /v1/responses is refused with 426; nothing is sent or sealed."""
    proxy = _proxy(home, upstream)
    upgrade = {
        "connection": "Upgrade", "upgrade": "websocket", "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", **OPENAI_HEADERS,
    }  # fmt: skip
    try:
        responses = httpx.get(f"{proxy.url}/v1/responses", headers=upgrade)
        messages = httpx.get(f"{proxy.url}/v1/messages", headers=upgrade)
        after = httpx.post(
            f"{proxy.url}/v1/responses", json={"model": "gpt-test", "input": "hi"},
            headers=OPENAI_HEADERS,
        )  # fmt: skip
    finally:
        assert proxy.stop() == 0
    assert responses.status_code == 426
    assert responses.json()["error"]["code"] == "upgrade_required"
    assert messages.status_code == 426
    assert after.status_code == 200  # the HTTP fallback is served
    assert [request["path"] for request in upstream.requests()] == ["/v1/responses"]
    assert len(verdicts(home)) == 1


def test_concurrent_clamped_calls_never_share_the_same_room(home, upstream):
    """Eight calls at once on $0.60: one whole, one clamped to what is left, the rest 402."""
    proxy = _proxy(home, upstream, cap_usd="0.60")
    body = {**CLAUDE_CODE, "stream": True}
    headers = {**ANTHROPIC_HEADERS, "x-test-scenario": "pause:crowd"}
    answers: list[tuple[int, str | None]] = []
    answered = threading.Semaphore(0)

    def call() -> None:
        with httpx.Client(timeout=60) as client:
            request = client.build_request(
                "POST", f"{proxy.url}/v1/messages", json=body, headers=headers
            )
            response = client.send(request, stream=True)
            try:
                answers.append((response.status_code, response.headers.get("x-ledger-clamped")))
                answered.release()
                response.read()
            finally:
                response.close()

    threads = [threading.Thread(target=call) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for _ in threads:
            assert answered.acquire(timeout=60)
        upstream.release("crowd", 2 * 5)
        for thread in threads:
            thread.join(timeout=60)
    finally:
        assert proxy.stop() == 0
    first_estimate = micros("anthropic/claude-test", HI_INPUT, 32_000)
    limit = _fitting(600_000 - first_estimate)
    assert sorted(answers, key=str) == sorted(
        [(200, None), (200, str(limit))] + [(402, None)] * 6, key=str
    )
    reserved = [v["payload"]["reservation"] for v in verdicts(home)]
    assert sum(r["micros"] for r in reserved if r) < 600_000
    assert len(upstream.requests()) == 2
