"""OpenAI-compatible providers at /<name>/v1/...: gated, priced as <name>, refused when unpriced."""

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.helpers import (
    Proxy,
    Upstream,
    records,
    start_proxy,
    verdicts,
    write_config,
)

pytestmark = pytest.mark.timeout(120)
HEADERS = {"authorization": "Bearer sk-deepseek-test"}
CHAT = {
    "model": "deepseek-test",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "hi"}],
}


def _config(upstream: Upstream) -> str:
    return (
        f'[proxy.providers.deepseek]\nurl = "{upstream.url}/v1"\n\n'
        '[prices."deepseek/deepseek-test"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n'
    )


@pytest.fixture
def proxy(home: Path, upstream: Upstream) -> Iterator[Proxy]:
    write_config(home, upstream.url, extra=_config(upstream))
    running = start_proxy(home, "--listen", "127.0.0.1:0")
    yield running
    assert running.stop() == 0, running.lines


def test_chat_completions_are_gated_and_recorded_as_the_provider(proxy, upstream, home):
    """Provider deepseek, its own price, key deepseek:<id>; sent to its URL's /v1/..."""
    response = httpx.post(f"{proxy.url}/deepseek/v1/chat/completions", json=CHAT, headers=HEADERS)
    assert response.status_code == 200, response.text
    (record,) = records(home)
    assert record["provider"] == "deepseek"
    assert record["actual_micros"] == 2000 * 1 + 500 * 2  # the fake's usage at $1 / $2
    assert record["idempotency_key"].startswith("deepseek:chatcmpl-")
    (verdict,) = verdicts(home)
    assert verdict["payload"]["provider"] == "deepseek"
    (sent,) = upstream.requests()
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == HEADERS["authorization"]


def test_streams_and_the_responses_api_are_served_too(proxy, upstream, home):
    """A chat stream with usage and a Responses call, both recorded once."""
    stream = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream(
        "POST", f"{proxy.url}/deepseek/v1/chat/completions", json=stream, headers=HEADERS
    ) as response:
        assert "[DONE]" in response.read().decode()
    answer = httpx.post(
        f"{proxy.url}/deepseek/v1/responses",
        json={"model": "deepseek-test", "input": "hi", "max_output_tokens": 50},
        headers=HEADERS,
    )
    assert answer.status_code == 200
    spent = [record["actual_micros"] for record in records(home)]
    assert spent == [2000 * 1 + 500 * 2, 3000 * 1 + 900 * 2]
    assert [sent["path"] for sent in upstream.requests()] == [
        "/v1/chat/completions",
        "/v1/responses",
    ]


def test_a_request_without_a_limit_gets_max_tokens(proxy, upstream):
    """OpenAI-compatible upstreams all know max_tokens: the default limit is written there."""
    body = {"model": "deepseek-test", "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(f"{proxy.url}/deepseek/v1/chat/completions", json=body, headers=HEADERS)
    assert response.status_code == 200
    sent = json.loads(upstream.requests()[0]["body"])
    assert sent["max_tokens"] == 32_000
    assert "max_completion_tokens" not in sent


def test_an_unpriced_model_is_refused_before_sending(proxy, upstream, home):
    """400 naming the model; nothing sent, nothing reserved."""
    body = {**CHAT, "model": "mystery-model"}
    response = httpx.post(f"{proxy.url}/deepseek/v1/chat/completions", json=body, headers=HEADERS)
    assert response.status_code == 400
    assert "deepseek/mystery-model" in response.json()["error"]["message"]
    assert upstream.requests() == []
    assert not (home / "events.jsonl").exists()  # nothing reserved, nothing sealed


def test_other_paths_under_the_prefix_and_unknown_names_are_404(proxy, upstream):
    """Only the two model endpoints of a configured provider are served."""
    embeddings = httpx.post(f"{proxy.url}/deepseek/v1/embeddings", json={}, headers=HEADERS)
    unknown = httpx.post(f"{proxy.url}/mistral/v1/chat/completions", json=CHAT, headers=HEADERS)
    assert (embeddings.status_code, unknown.status_code) == (404, 404)
    assert upstream.requests() == []


def test_the_url_is_the_sdks_base_url_with_its_version_path(home, upstream):
    """Google's OpenAI endpoint: url .../v1beta/openai gets /chat/completions only, not /v1.

    A url without a version path is used as given, and the start-up log names
    each provider's resolved upstream.
    """
    extra = (
        f'[proxy.providers.gemini]\nurl = "{upstream.url}/v1beta/openai"\n'
        'key_env = "GOOGLE_OPENAI_KEY"\n\n'
        f'[proxy.providers.bare]\nurl = "{upstream.url}"\n\n'
        '[prices."gemini/deepseek-test"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n\n'
        '[prices."bare/deepseek-test"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n'
    )
    write_config(home, upstream.url, extra=extra)
    running = start_proxy(home, "--listen", "127.0.0.1:0")
    try:
        gemini = httpx.post(f"{running.url}/gemini/v1/chat/completions", json=CHAT, headers=HEADERS)
        bare = httpx.post(f"{running.url}/bare/v1/chat/completions", json=CHAT, headers=HEADERS)
        started = [line for line in running.lines if "upstream " in line]
    finally:
        assert running.stop() == 0, running.lines
    assert gemini.status_code == 200, gemini.text
    assert gemini.json()["usage"]["prompt_tokens"] > 0
    assert bare.status_code == 200, bare.text
    assert [sent["path"] for sent in upstream.requests()] == [
        "/v1beta/openai/chat/completions",
        "/chat/completions",
    ]
    assert [r["provider"] for r in records(home)] == ["gemini", "bare"]
    assert any(
        f"upstream gemini: {upstream.url}/v1beta/openai/chat/completions" in line
        for line in started
    ), started
    assert any(f"upstream bare: {upstream.url}/chat/completions" in line for line in started)
