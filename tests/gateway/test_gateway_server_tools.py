"""Server-side web searches: bounded in the estimate, priced in the record.

A request with a web search tool and no limit gets ``proxy.server_tool_max_uses``
(5) written into what is forwarded, and its estimate includes that many
searches at $10 per 1,000; the record adds the searches the answer reports.
"""

import json

import httpx

from tests.gateway.helpers import (
    ANTHROPIC_HEADERS,
    OPENAI_HEADERS,
    micros,
    records,
    start_proxy,
    verdicts,
    write_config,
)

SEARCH = 10_000  # $10 per 1,000 searches, in micro-USD each


def _post(home, upstream, path: str, body: dict[str, object], headers: dict[str, str],
          extra: str = "") -> httpx.Response:  # fmt: skip
    write_config(home, upstream.url, extra=extra)
    proxy = start_proxy(home, "--listen", "127.0.0.1:0")
    try:
        return httpx.post(f"{proxy.url}{path}", content=json.dumps(body).encode(),
                          headers=headers, timeout=60)  # fmt: skip
    finally:
        assert proxy.stop() == 0, proxy.lines


def test_anthropic_web_searches_are_bounded_and_priced(home, upstream):
    body = {"model": "claude-test", "max_tokens": 1000,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}]}  # fmt: skip
    response = _post(home, upstream, "/v1/messages", body,
                     {**ANTHROPIC_HEADERS, "x-test-scenario": "search:200"})  # fmt: skip
    assert response.status_code == 200
    (sent,) = upstream.requests()
    assert json.loads(sent["body"])["tools"][0]["max_uses"] == 5
    (verdict,) = verdicts(home)
    assert verdict["payload"]["server_tool_micros"] == 5 * SEARCH
    assert verdict["payload"]["estimated_micros"] > 5 * SEARCH + micros(
        "anthropic/claude-test", 1, 1000
    )
    (record,) = records(home)
    assert record["web_searches"] == 200
    assert record["actual_micros"] == micros("anthropic/claude-test", 1000, 700) + 200 * SEARCH


def test_a_request_limit_is_kept_and_the_default_is_configurable(home, upstream):
    body = {"model": "claude-test", "max_tokens": 1000,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
                      {"type": "web_search_20250305", "name": "web_search_2"}]}  # fmt: skip
    _post(home, upstream, "/v1/messages", body, ANTHROPIC_HEADERS,
          extra="[proxy]\nserver_tool_max_uses = 3\n")  # fmt: skip
    (sent,) = upstream.requests()
    assert [tool["max_uses"] for tool in json.loads(sent["body"])["tools"]] == [2, 3]
    (verdict,) = verdicts(home)
    assert verdict["payload"]["server_tool_micros"] == 5 * SEARCH


def test_openai_web_search_calls_are_bounded_and_priced(home, upstream):
    body = {"model": "gpt-test", "max_output_tokens": 1000, "input": "hi",
            "tools": [{"type": "web_search"}]}  # fmt: skip
    response = _post(home, upstream, "/v1/responses", body,
                     {**OPENAI_HEADERS, "x-test-scenario": "search:3"})  # fmt: skip
    assert response.status_code == 200
    (sent,) = upstream.requests()
    assert json.loads(sent["body"])["max_tool_calls"] == 5
    (verdict,) = verdicts(home)
    assert verdict["payload"]["server_tool_micros"] == 5 * SEARCH
    (record,) = records(home)
    assert record["actual_micros"] == micros("openai/gpt-test", 3000, 900) + 3 * SEARCH
