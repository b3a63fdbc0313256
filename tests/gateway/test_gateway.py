"""`ledger proxy` as a real process between the official SDKs and a local upstream process."""

import json
import subprocess
import sys
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.conftest import clean_env
from tests.gateway.helpers import (
    ANTHROPIC_HEADERS,
    Proxy,
    anthropic_body,
    chain,
    micros,
    records,
    start_proxy,
    verdicts,
    write_config,
)

pytestmark = pytest.mark.timeout(120)


def _anthropic(proxy: Proxy, **headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=proxy.url, api_key="sk-ant-test", default_headers=headers, max_retries=0
    )


def _openai(proxy: Proxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test", max_retries=0)


class TestAnthropicThroughTheGateway:
    def test_a_call_is_recorded_once_at_the_exact_cost_of_its_usage(self, proxy, gateway_home):
        """The SDK's call reaches the upstream, and its usage is sealed once, priced exactly."""
        with _anthropic(proxy, **{"x-ledger-agent": "research"}) as client:
            raw = client.messages.with_raw_response.create(
                model="claude-test", max_tokens=1000, messages=[{"role": "user", "content": "hi"}]
            )
        message = raw.parse()
        assert message.usage.output_tokens == 700
        assert raw.headers["x-ledger-verdict"] == "allow"
        (record,) = records(gateway_home)
        assert record["actual_micros"] == micros("anthropic/claude-test", 1000, 700) == 13500
        assert record["verdict_ref"] == raw.headers["x-ledger-verdict-ref"]
        assert record["idempotency_key"] == f"anthropic:{message.id}"
        (verdict,) = verdicts(gateway_home)
        assert verdict["payload"]["agent"] == "research"
        assert verdict["payload"]["provider"] == "anthropic"

    def test_a_stream_is_recorded_from_its_usage_events(self, proxy, gateway_home):
        """message_start and message_delta usage are summed into one record."""
        with _anthropic(proxy) as client:
            stream = client.messages.create(
                model="claude-test", max_tokens=1000, stream=True,
                messages=[{"role": "user", "content": "hi"}],
            )  # fmt: skip
            kinds = [event.type for event in stream]
        assert kinds[0] == "message_start"
        assert kinds[-1] == "message_stop"
        (record,) = records(gateway_home)
        assert record["actual_micros"] == 13500

    def test_the_beta_query_string_is_kept(self, proxy, upstream):
        """Claude Code's ?beta=true reaches the upstream as sent."""
        response = httpx.post(f"{proxy.url}/v1/messages?beta=true&x=1", content=anthropic_body(),
                              headers=ANTHROPIC_HEADERS)  # fmt: skip
        assert response.status_code == 200
        (sent,) = upstream.requests()
        assert sent["path"] == "/v1/messages"
        assert sent["query"] == "beta=true&x=1"

    def test_the_session_comes_from_metadata_user_id_without_the_header(self, proxy, gateway_home):
        """An Anthropic request's metadata.user_id is the verdict's cycle_id."""
        with _anthropic(proxy) as client:
            client.messages.create(
                model="claude-test", max_tokens=10, metadata={"user_id": "session-7"},
                messages=[{"role": "user", "content": "hi"}],
            )  # fmt: skip
        (verdict,) = verdicts(gateway_home)
        assert verdict["payload"]["cycle_id"] == "session-7"
        assert records(gateway_home)[0]["cycle_id"] == "session-7"

    def test_claude_codes_user_id_gives_its_session_part_only(self, proxy, gateway_home):
        """Claude Code's JSON user_id: the session is its session_id, never the device id."""
        session = "4f1c2a8e-93b0-4c57-9d1e-2b7a6f0e5c31"
        user_id = json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": session})
        with _anthropic(proxy) as client:
            client.messages.create(
                model="claude-test", max_tokens=10, metadata={"user_id": user_id},
                messages=[{"role": "user", "content": "hi"}],
            )  # fmt: skip
        (verdict,) = verdicts(gateway_home)
        assert verdict["payload"]["cycle_id"] == session
        assert "d" * 64 not in (gateway_home / "events.jsonl").read_text()

    def test_credentials_go_upstream_and_ledger_and_hop_headers_do_not(self, proxy, upstream):
        """The caller's key is forwarded; x-ledger-* and hop-by-hop headers stay at the gateway."""
        headers = {**ANTHROPIC_HEADERS, "x-ledger-session": "s1", "proxy-authorization": "x",
                   "keep-alive": "timeout=5", "connection": "keep-alive"}  # fmt: skip
        httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(), headers=headers)
        (sent,) = upstream.requests()
        assert sent["headers"]["x-api-key"] == "sk-ant-test"
        assert sent["headers"]["anthropic-version"] == "2023-06-01"
        assert not [name for name in sent["headers"] if name.startswith("x-ledger-")]
        assert "proxy-authorization" not in sent["headers"]
        assert "keep-alive" not in sent["headers"]

    def test_a_cookie_set_for_one_call_never_goes_upstream_with_another(self, proxy, upstream):
        """The gateway keeps no cookies: a provider's Set-Cookie reaches its own caller only."""
        first = httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(),
                           headers={**ANTHROPIC_HEADERS, "x-test-scenario": "cookie"})  # fmt: skip
        assert first.status_code == 200
        assert "__cf_bm=one-callers" in first.headers.get("set-cookie", "")
        httpx.get(f"{proxy.url}/v1/models", headers=ANTHROPIC_HEADERS)  # a free endpoint too
        httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(), headers=ANTHROPIC_HEADERS)
        own = {**ANTHROPIC_HEADERS, "cookie": "mine=1"}  # a caller's own cookie goes with its call
        httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(), headers=own)
        sent = [request["headers"].get("cookie") for request in upstream.requests()]
        assert sent == [None, None, None, "mine=1"]


class TestOpenAIThroughTheGateway:
    def test_chat_completions_json_and_stream_are_recorded(self, proxy, gateway_home):
        """A plain and a streamed chat completion are each sealed once at their usage."""
        with _openai(proxy) as client:
            client.chat.completions.create(
                model="gpt-test", max_completion_tokens=100,
                messages=[{"role": "user", "content": "hi"}],
            )  # fmt: skip
            stream = client.chat.completions.create(
                model="gpt-test", max_completion_tokens=100, stream=True,
                stream_options={"include_usage": True},
                messages=[{"role": "user", "content": "hi"}],
            )  # fmt: skip
            chunks = list(stream)
        assert chunks[-1].usage is not None
        spent = [r["actual_micros"] for r in records(gateway_home)]
        assert spent == [micros("openai/gpt-test", 2000, 500)] * 2 == [8000, 8000]

    def test_a_chat_stream_without_include_usage_is_recorded_at_its_usage(
        self, proxy, gateway_home
    ):
        """No include_usage: the gateway asks for it, and keeps the usage chunk from the client."""
        with _openai(proxy) as client:
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-test", max_completion_tokens=100, stream=True,
                messages=[{"role": "user", "content": "hi"}],
            )  # fmt: skip
            chunks = list(raw.parse())
        assert all(chunk.usage is None for chunk in chunks)
        (record,) = records(gateway_home)
        (verdict,) = verdicts(gateway_home)
        assert record["actual_micros"] == micros("openai/gpt-test", 2000, 500)
        assert verdict["payload"]["estimated_micros"] > 0
        assert record["verdict_ref"] == raw.headers["x-ledger-verdict-ref"]

    def test_responses_json_and_stream_are_recorded(self, proxy, gateway_home):
        """The Responses API is gated and recorded from response.completed's usage."""
        with _openai(proxy) as client:
            client.responses.create(model="gpt-test", max_output_tokens=100, input="hi")
            events = list(
                client.responses.create(
                    model="gpt-test", max_output_tokens=100, input="hi", stream=True
                )
            )
        assert events[-1].type == "response.completed"
        spent = [r["actual_micros"] for r in records(gateway_home)]
        assert spent == [micros("openai/gpt-test", 3000, 900)] * 2 == [13200, 13200]


class TestFreeEndpoints:
    def test_models_and_count_tokens_pass_ungated(self, proxy, upstream, gateway_home):
        """GET /v1/models and count_tokens are forwarded and leave nothing in the chain."""
        with _anthropic(proxy) as client:
            counted = client.messages.count_tokens(
                model="claude-test", messages=[{"role": "user", "content": "hi"}]
            )
            listed = client.models.list()
        assert counted.input_tokens == 12
        assert [model.id for model in listed] == ["claude-test"]
        assert [sent["path"] for sent in upstream.requests()] == [
            "/v1/messages/count_tokens",
            "/v1/models",
        ]
        assert not (gateway_home / "events.jsonl").exists() or not verdicts(gateway_home)


class TestRefusals:
    def test_a_halt_is_402_in_the_provider_shape_and_nothing_is_sent(self, home, upstream):
        """Over the cap: the SDK sees 402 budget_exceeded with the figures; upstream sees nothing."""
        # Without the clamp, which would send the OpenAI call with a lower limit.
        write_config(home, upstream.url, cap_usd="0.01", extra="[proxy]\nclamp = false\n")
        proxy = start_proxy(home, "--listen", "127.0.0.1:0")
        try:
            with _anthropic(proxy) as client, pytest.raises(anthropic.APIStatusError) as caught:
                client.messages.create(
                    model="claude-test", max_tokens=1000,
                    messages=[{"role": "user", "content": "hi"}],
                )  # fmt: skip
            with _openai(proxy) as oai, pytest.raises(openai.APIStatusError) as oai_caught:
                oai.chat.completions.create(
                    model="gpt-test", max_tokens=100_000,
                    messages=[{"role": "user", "content": "hi"}],
                )  # fmt: skip
        finally:
            assert proxy.stop() == 0
        assert caught.value.status_code == 402
        body = caught.value.body
        assert isinstance(body, dict)
        assert body["type"] == "error"
        assert body["error"]["type"] == "budget_exceeded"
        message = body["error"]["message"]
        for part in ("halt-100", "deciding cap aggregate of $0.01", "$0.00 used",
                     "$0.00 reserved", "estimate is $0.015", "the request was not sent"):  # fmt: skip
            assert part in message, message
        assert caught.value.response.headers["x-ledger-verdict"] == "halt-100"
        assert oai_caught.value.status_code == 402
        assert oai_caught.value.body == {
            "type": "budget_exceeded", "code": "budget_exceeded",
            "message": oai_caught.value.body["message"],  # type: ignore[index]
        }  # fmt: skip
        assert upstream.requests() == []
        assert records(home) == []

    @pytest.mark.parametrize(
        ("body", "needle"),
        [
            (b'{"model": "claude-test", "max_tokens": 0, "messages": []}', "max_tokens"),
            (b"not json", "JSON"),
        ],
    )
    def test_a_body_the_estimate_refuses_is_400_and_not_sent(
        self, proxy, upstream, gateway_home, body, needle
    ):
        """A bad output limit, or not JSON: 400 in Anthropic's shape, nothing forwarded or sealed."""
        response = httpx.post(f"{proxy.url}/v1/messages", content=body, headers=ANTHROPIC_HEADERS)
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_request_error"
        assert needle in response.json()["error"]["message"]
        assert upstream.requests() == []
        assert not (gateway_home / "events.jsonl").exists() or chain(gateway_home) == []

    def test_an_unknown_path_is_404_unless_passed_through(self, home, upstream):
        """Message batches are refused; a path in proxy.passthrough is forwarded ungated."""
        write_config(home, upstream.url, extra='[proxy]\npassthrough = ["/v1/embeddings"]\n')
        proxy = start_proxy(home, "--listen", "127.0.0.1:0")
        try:
            batches = httpx.post(
                f"{proxy.url}/v1/messages/batches", content=b"{}", headers=ANTHROPIC_HEADERS
            )
            files = httpx.get(f"{proxy.url}/v1/files")
            passed = httpx.post(f"{proxy.url}/v1/embeddings", content=b"{}")
        finally:
            assert proxy.stop() == 0
        assert batches.status_code == 404
        assert batches.json()["error"]["type"] == "not_found_error"
        assert files.status_code == 404
        assert files.json()["error"]["code"] == "not_found_error"
        assert passed.status_code == 404  # the upstream's own answer: it was forwarded
        assert [sent["path"] for sent in upstream.requests()] == ["/v1/embeddings"]

    def test_a_body_over_the_limit_is_413(self, home, upstream):
        """proxy.max_request_bytes bounds what the gateway reads; nothing is sent."""
        write_config(home, upstream.url, extra="[proxy]\nmax_request_bytes = 100\n")
        proxy = start_proxy(home, "--listen", "127.0.0.1:0")
        try:
            body = anthropic_body(system="x" * 200)
            response = httpx.post(f"{proxy.url}/v1/messages", content=body,
                                  headers=ANTHROPIC_HEADERS)  # fmt: skip
        finally:
            assert proxy.stop() == 0
        assert response.status_code == 413
        assert response.json()["error"]["type"] == "request_too_large"
        assert upstream.requests() == []

    def test_an_unreachable_upstream_is_502_and_settles_at_zero(self, home):
        """Nothing listens upstream: 502, and the reservation is settled at $0."""
        write_config(home, "http://127.0.0.1:9")
        proxy = start_proxy(home, "--listen", "127.0.0.1:0")
        try:
            response = httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(),
                                  headers=ANTHROPIC_HEADERS)  # fmt: skip
        finally:
            assert proxy.stop() == 0
        assert response.status_code == 502
        assert response.json()["error"]["type"] == "api_error"
        (record,) = records(home)
        assert record["actual_micros"] == 0
        assert record["verdict_ref"] == response.headers["x-ledger-verdict-ref"]

    @pytest.mark.parametrize("status", [429, 500, 529])
    def test_an_upstream_error_is_passed_on_and_settles_at_zero(self, proxy, gateway_home, status):
        """The provider's own error reaches the caller; no usage, so $0 is recorded."""
        response = httpx.post(
            f"{proxy.url}/v1/messages", content=anthropic_body(),
            headers={**ANTHROPIC_HEADERS, "x-test-scenario": f"status:{status}"},
        )  # fmt: skip
        assert response.status_code == status
        assert response.json()["error"]["type"] == "overloaded_error"
        assert response.headers["x-ledger-verdict"] == "allow"
        (record,) = records(gateway_home)
        assert record["actual_micros"] == 0


class TestStartup:
    def _run(self, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ledger", "--home", str(home), "proxy", *args],
            capture_output=True, text=True, env=clean_env(), timeout=60, check=False,
        )  # fmt: skip

    def test_a_non_loopback_address_without_gateway_keys_is_refused(self, home):
        """Listening where other machines reach it needs gateway keys: exit 78, one line."""
        result = self._run(home, "--listen", "0.0.0.0:8787")
        assert result.returncode == 78
        assert result.stderr.startswith("ledger: --listen: 0.0.0.0:8787 is reachable")
        assert len(result.stderr.splitlines()) == 1

    def test_a_malformed_proxy_key_is_exit_78_naming_it(self, home):
        """A bad [proxy] value stops the gateway before it listens."""
        with (home / "ledger.toml").open("a") as config:
            config.write("\n[proxy]\nmax_upstream_connections = 0\n")
        result = self._run(home, "--listen", "127.0.0.1:0")
        assert result.returncode == 78
        assert "proxy.max_upstream_connections" in result.stderr
        assert "Traceback" not in result.stderr

    def test_a_home_without_a_daily_cap_is_exit_78(self, home, upstream):
        """Every call is gated, so a gateway without a cap would admit nothing it could check."""
        write_config(home, upstream.url)
        text = (home / "ledger.toml").read_text().replace("daily_cap = 100\n", "")
        (home / "ledger.toml").write_text(text)
        result = self._run(home, "--listen", "127.0.0.1:0")
        assert result.returncode == 78
        assert "usd.daily_cap" in result.stderr

    def test_a_torn_chain_answers_402_halt_uncertainty_and_sends_nothing(
        self, gateway_home, upstream
    ):
        """A gateway that cannot seal forwards nothing."""
        proxy = start_proxy(gateway_home, "--listen", "127.0.0.1:0")
        try:
            first = httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(),
                               headers=ANTHROPIC_HEADERS)  # fmt: skip
            assert first.status_code == 200
            with (gateway_home / "events.jsonl").open("a") as log:
                log.write('{"schema_version": "1.1.0", "prim')
            response = httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(),
                                  headers=ANTHROPIC_HEADERS)  # fmt: skip
        finally:
            assert proxy.stop() == 0
        assert response.status_code == 402
        assert response.headers["x-ledger-verdict"] == "halt-uncertainty"
        assert "counter_inconsistent" in response.json()["error"]["message"]
        assert len(upstream.requests()) == 1


def test_a_configuration_broken_while_running_halts_and_sends_nothing(gateway_home, upstream):
    """Each decision reads ledger.toml afresh: an unusable one is 402, never a pass."""
    proxy = start_proxy(gateway_home, "--listen", "127.0.0.1:0")
    try:
        with (gateway_home / "ledger.toml").open("a") as config:
            config.write("\n[chain]\nlock_timeout_seconds = -1\n")
        response = httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(),
                              headers=ANTHROPIC_HEADERS)  # fmt: skip
    finally:
        assert proxy.stop() == 0
    assert response.status_code == 402
    assert response.headers["x-ledger-verdict"] == "halt-uncertainty"
    assert "chain.lock_timeout_seconds" in response.json()["error"]["message"]
    assert upstream.requests() == []


def test_every_gated_response_names_its_verdict(proxy):
    """x-ledger-verdict, -verdict-ref and -usd-remaining are on every gated answer."""
    response = httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(),
                          headers=ANTHROPIC_HEADERS)  # fmt: skip
    assert response.headers["x-ledger-verdict"] == "allow"
    assert len(response.headers["x-ledger-verdict-ref"]) == 64
    assert float(response.headers["x-ledger-usd-remaining"]) == pytest.approx(100.0)
    assert json.loads(response.content)["usage"]["output_tokens"] == 700
