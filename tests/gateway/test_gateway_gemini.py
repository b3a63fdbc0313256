"""The Gemini API through `ledger proxy`: gated, forwarded with its key, recorded from usageMetadata."""

import json

import httpx
import pytest

from tests.conftest import clean_env
from tests.gateway.helpers import (
    NOW,
    chain,
    records,
    start_proxy,
    verdicts,
    write_config,
)

pytestmark = pytest.mark.timeout(120)
KEY = "AIzaSyTEST-not-a-real-key-0123456789"
HEADERS = {"x-goog-api-key": KEY}
BODY = {
    "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    "generationConfig": {"maxOutputTokens": 1000},
}
# The fake's usage: 4000 prompt tokens (1000 of them cached), 300 answer and 200
# thought tokens, at $1 per million input (and cache reads) and $4 per million output.
CALL_MICROS = 3000 * 1 + 1000 * 1 + 500 * 4
GENERATE = "/v1beta/models/gemini-test:generateContent"
STREAM = "/v1beta/models/gemini-test:streamGenerateContent"


def test_generate_content_is_recorded_once_at_its_exact_cost(proxy, upstream, gateway_home):
    """Provider google, key google:<responseId>, priced from usageMetadata; the key goes upstream."""
    response = httpx.post(f"{proxy.url}{GENERATE}", json=BODY, headers=HEADERS)
    assert response.status_code == 200, response.text
    assert response.json()["candidates"][0]["content"]["parts"][0]["text"] == "hello"
    assert response.headers["x-ledger-verdict"] == "allow"
    (record,) = records(gateway_home)
    assert record["provider"] == "google"
    assert record["actual_micros"] == CALL_MICROS
    assert record["idempotency_key"].startswith("google:gemini")
    (verdict,) = verdicts(gateway_home)
    assert verdict["payload"]["provider"] == "google"
    assert verdict["payload"]["model"] == "gemini-test"
    (sent,) = upstream.requests()
    assert sent["path"] == GENERATE
    assert sent["headers"]["x-goog-api-key"] == KEY


def test_a_streamed_call_keeps_alt_sse_and_is_recorded_from_its_last_chunk(
    proxy, upstream, gateway_home
):
    """streamGenerateContent?alt=sse passes as SSE; the call is recorded once, at its usage."""
    with httpx.stream(
        "POST", f"{proxy.url}{STREAM}?alt=sse", json=BODY, headers=HEADERS
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        text = response.read().decode()
    assert '"finishReason": "STOP"' in text
    (record,) = records(gateway_home)
    assert record["actual_micros"] == CALL_MICROS
    assert upstream.requests()[0]["query"] == "alt=sse"


def test_a_stream_without_alt_sse_is_one_json_array(proxy, gateway_home):
    """Without alt=sse Gemini streams one JSON array: read whole and recorded."""
    response = httpx.post(f"{proxy.url}{STREAM}", json=BODY, headers=HEADERS)
    assert response.status_code == 200
    assert len(response.json()) == 2
    (record,) = records(gateway_home)
    assert record["actual_micros"] == CALL_MICROS


def test_a_key_in_the_query_goes_upstream_and_never_into_the_log(home, upstream):
    """?key= is forwarded as it came; the gateway's log and chain never hold it."""
    write_config(home, upstream.url)
    proxy = start_proxy(home, "--listen", "127.0.0.1:0")
    try:
        response = httpx.post(f"{proxy.url}{GENERATE}?key={KEY}", json=BODY)
        broken = httpx.post(
            f"{proxy.url}{GENERATE}?key={KEY}", json=BODY,
            headers={"x-test-scenario": "status:503"},
        )  # fmt: skip
    finally:
        assert proxy.stop() == 0
    assert response.status_code == 200
    assert broken.status_code == 503
    assert upstream.requests()[0]["query"] == f"key={KEY}"
    assert KEY not in "\n".join(proxy.lines)
    assert KEY not in (home / "events.jsonl").read_text()


def test_count_tokens_and_the_model_list_pass_ungated(proxy, upstream, gateway_home):
    """countTokens and GET /v1beta/models cost nothing: forwarded, no verdict."""
    counted = httpx.post(
        f"{proxy.url}/v1beta/models/gemini-test:countTokens", json=BODY, headers=HEADERS
    )
    listed = httpx.get(f"{proxy.url}/v1beta/models", headers=HEADERS)
    assert counted.json() == {"totalTokens": 12}
    assert listed.json()["models"][0]["name"] == "models/gemini-test"
    assert len(upstream.requests()) == 2
    assert not (gateway_home / "events.jsonl").exists() or chain(gateway_home) == []


def test_without_max_output_tokens_the_default_is_written_into_generation_config(
    proxy, upstream, gateway_home
):
    """Gemini CLI sets no limit: generationConfig.maxOutputTokens is given 32000."""
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    response = httpx.post(f"{proxy.url}{GENERATE}", json=body, headers=HEADERS)
    assert response.status_code == 200
    sent = json.loads(upstream.requests()[0]["body"])
    assert sent["generationConfig"] == {"maxOutputTokens": 32_000}
    assert verdicts(gateway_home)[0]["payload"]["max_output_tokens"] == 32_000


def test_a_halt_is_402_in_geminis_error_shape(home, upstream):
    """Over the cap: {"error": {"code": 402, "message", "status"}}, nothing sent."""
    write_config(home, upstream.url, cap_usd="0.001", extra="[proxy]\nclamp = false\n")
    proxy = start_proxy(home, "--listen", "127.0.0.1:0")
    try:
        response = httpx.post(f"{proxy.url}{GENERATE}", json=BODY, headers=HEADERS)
        unknown = httpx.post(f"{proxy.url}/v1beta/models/gemini-test:embedContent", json=BODY)
    finally:
        assert proxy.stop() == 0
    assert response.status_code == 402
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (402, "RESOURCE_EXHAUSTED")
    assert "halt-100" in error["message"]
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == 404
    assert upstream.requests() == []


def test_with_a_gateway_key_the_gateways_gemini_key_goes_and_no_query_key(
    home, upstream, run_inproc
):
    """A key presented as x-goog-api-key: GEMINI_API_KEY is sent instead, ?key= is dropped."""
    write_config(home, upstream.url)
    issued = run_inproc(
        ["--home", str(home), "keys", "issue", "gemini-cli", "--agent", "gem"], {"LEDGER_NOW": NOW}
    )
    secret = issued.json()["key"]
    env = clean_env(LEDGER_NOW=NOW, GEMINI_API_KEY="gateway-own-gemini-key")
    proxy = start_proxy(home, "--listen", "127.0.0.1:0", env=env)
    try:
        response = httpx.post(
            f"{proxy.url}{GENERATE}?key=leaked-by-mistake&alt=json", json=BODY,
            headers={"x-goog-api-key": secret},
        )  # fmt: skip
    finally:
        assert proxy.stop() == 0
    assert response.status_code == 200, response.text
    (sent,) = upstream.requests()
    assert sent["headers"]["x-goog-api-key"] == "gateway-own-gemini-key"
    assert sent["query"] == "alt=json"
    assert verdicts(home)[0]["payload"]["agent"] == "gem"
