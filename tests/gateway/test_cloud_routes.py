"""The /bedrock, /vertex and /azure routes of the real gateway, against the fake clouds."""

from collections.abc import Iterator
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from genai_prices import Usage, calc_price

from ledger.providers.bedrock import ConverseReader
from tests.gateway.cloud_helpers import (
    MESSAGES,
    MODEL,
    VERTEX_PATH,
    Clouds,
    Served,
    cloud_home,
    served_clouds,
    start_cloud_gateway,
)
from tests.gateway.helpers import Proxy

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def served_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_clouds(tmp_path_factory.mktemp("clouds")) as served:
        yield served


@pytest.fixture
def served(served_module: Served) -> Served:
    served_module.mark()
    return served_module


def _post(
    gateway: Proxy, path: str, body: Any, secret: str | None, **headers: str
) -> httpx.Response:
    if secret is not None:
        headers.setdefault("authorization", f"Bearer {secret}")
    return httpx.post(gateway.url + path, json=body, headers=headers, timeout=30)


def test_without_gateway_keys_the_cloud_routes_answer_401_naming_the_setting(
    home: Path, tmp_path: Path
) -> None:
    fake = Clouds()
    cloud_home(home, fake, require_keys=False)
    gateway = start_cloud_gateway(home, tmp_path, fake)
    try:
        for path, shape in [
            (f"/bedrock/model/{MODEL}/invoke", "message"),
            (VERTEX_PATH, "error"),
            ("/azure/openai/v1/responses", "error"),
        ]:  # fmt: skip
            answer = _post(gateway, path, MESSAGES, None)
            assert answer.status_code == 401
            assert shape in answer.json()
            assert "proxy.require_keys" in answer.text
        assert fake.calls() == []
    finally:
        assert gateway.stop() == 0
        fake.stop()


def test_a_caller_without_a_gateway_key_is_refused_and_nothing_is_sent(served: Served) -> None:
    answer = _post(served.gateway, f"/bedrock/model/{MODEL}/invoke", MESSAGES, None)
    assert answer.status_code == 401
    assert answer.headers["x-amzn-errortype"] == "UnrecognizedClientException"
    assert served.calls() == []


def _aws_micros(model: str, input_tokens: int, output_tokens: int) -> int:
    tokens = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    price = calc_price(tokens, model_ref=model, provider_id="aws").total_price
    return int((Decimal(price) * 1_000_000).to_integral_value(rounding=ROUND_CEILING))


def test_an_invoke_is_signed_and_recorded_at_its_usage_with_the_key_as_x_api_key(
    served: Served,
) -> None:
    answer = _post(
        served.gateway, f"/bedrock/model/{MODEL}/invoke", MESSAGES, None,
        **{"x-api-key": served.secret},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    (call,) = served.calls()
    (record,) = served.records()
    assert record["idempotency_key"] == f"anthropic:{call['id']}"  # the response's own key
    assert record["provider"] == "bedrock"
    usage = call["usage"]
    assert record["actual_micros"] == _aws_micros(
        MODEL, usage["input_tokens"], usage["output_tokens"]
    )
    assert served.verified() == 1


def test_an_unpriced_model_is_refused_400_in_bedrocks_shape_before_sending(served: Served) -> None:
    answer = _post(
        served.gateway, "/bedrock/model/acme.unknown-v1:0/invoke", MESSAGES, served.secret
    )
    assert answer.status_code == 400
    assert answer.headers["x-amzn-errortype"] == "ValidationException"
    assert "no price for bedrock/acme.unknown-v1:0" in answer.json()["message"]
    assert served.calls() == []


def test_at_the_cap_the_refusal_is_a_402_service_quota_exceeded(served: Served) -> None:
    big = {
        **MESSAGES,
        "max_tokens": 64_000,
        "messages": [{"role": "user", "content": "x" * 900_000}],
    }
    answer = _post(served.gateway, f"/bedrock/model/{MODEL}/invoke", big, served.secret)
    assert answer.status_code == 402
    assert answer.headers["x-amzn-errortype"] == "ServiceQuotaExceededException"
    assert "halt-100" in answer.json()["message"]
    assert served.calls() == []


def test_the_control_plane_passes_ungated_and_signed(served: Served) -> None:
    answer = httpx.get(
        f"{served.gateway.url}/bedrock/inference-profiles?type=SYSTEM_DEFINED",
        headers={"authorization": f"Bearer {served.secret}"}, timeout=30,
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"inferenceProfileSummaries": []}
    assert served.verified() == 1
    assert served.records() == []


@pytest.mark.parametrize("action", ["converse", "converse-stream"])
def test_converse_gets_the_default_limit_written_and_is_recorded_at_its_usage(
    served: Served, action: str
) -> None:
    body = {"messages": [{"role": "user", "content": [{"text": "hi"}]}],
            "system": [{"text": "be brief"}]}  # fmt: skip
    answer = _post(served.gateway, f"/bedrock/model/{MODEL}/{action}", body, served.secret)
    assert answer.status_code == 200, answer.text
    (call,) = served.calls()
    assert call["max_tokens"] == 32_000  # proxy.default_max_output_tokens, written for it
    (record,) = served.records()
    usage = call["usage"]
    assert record["actual_micros"] == _aws_micros(
        MODEL, usage["inputTokens"], usage["outputTokens"]
    )
    if action == "converse-stream":
        reader = ConverseReader()
        reader.feed_frames(answer.content)
        assert reader.finished
        assert reader.usage == usage  # the frames came through unchanged


def test_an_unmapped_azure_deployment_is_refused_naming_it(served: Served) -> None:
    body = {"input": "hi", "max_output_tokens": 100}
    path = "/azure/openai/deployments/staging-x/responses?api-version=2025-04-01-preview"
    answer = _post(served.gateway, path, body, None, **{"api-key": served.secret})
    assert answer.status_code == 400
    assert "staging-x" in answer.json()["error"]["message"]
    assert "[proxy.azure.deployments]" in answer.json()["error"]["message"]
    assert served.calls() == []


def test_a_mapped_azure_deployment_is_priced_as_its_model(served: Served) -> None:
    body = {"input": "hi", "max_output_tokens": 100, "stream": True}
    path = "/azure/openai/deployments/prod-gpt5/responses?api-version=2025-04-01-preview"
    answer = _post(served.gateway, path, body, None, **{"api-key": served.secret})
    assert answer.status_code == 200, answer.text
    (call,) = served.calls()
    (record,) = served.records()
    assert call["model"] == "gpt-5"
    assert record["idempotency_key"] == f"azure:{call['id']}"
    assert record["provider"] == "azure"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"/bedrock/model/{MODEL}/count-tokens", {"input": {"invokeModel": {"body": "{}"}}}),
        (
            VERTEX_PATH.replace("claude-sonnet-4-5@20250929", "count-tokens"),
            {"model": "claude-sonnet-4-5@20250929", "messages": MESSAGES["messages"]},
        ),
    ],
)
def test_counting_tokens_passes_ungated_and_authorised_and_records_nothing(
    served: Served, path: str, body: dict[str, Any]
) -> None:
    answer = _post(served.gateway, path, body, served.secret)
    assert answer.status_code == 200, answer.text
    assert set(answer.json().values()) == {7}
    assert served.verified() == 1
    assert served.records() == []
    assert "x-ledger-verdict" not in answer.headers


@pytest.mark.parametrize("action", ["generateContent", "streamGenerateContent"])
def test_vertex_gemini_is_gated_as_the_gemini_api_and_recorded_at_its_usage(
    served: Served, action: str
) -> None:
    path = (
        "/vertex/v1/projects/p/locations/us-central1/publishers/google/models/"
        f"gemini-2.5-flash:{action}" + ("?alt=sse" if action.startswith("stream") else "")
    )
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"maxOutputTokens": 100}}  # fmt: skip
    answer = _post(served.gateway, path, body, served.secret)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-ledger-verdict"] == "allow"
    (call,) = served.calls()
    (record,) = served.records()
    assert record["provider"] == "vertex"
    usage = Usage(
        input_tokens=call["usage"]["promptTokenCount"],
        output_tokens=call["usage"]["candidatesTokenCount"],
    )
    price = calc_price(usage, model_ref="gemini-2.5-flash", provider_id="google").total_price
    expected = int((Decimal(price) * 1_000_000).to_integral_value(rounding=ROUND_CEILING))
    assert record["actual_micros"] == expected
    assert served.verified() == 1


def test_an_inference_profile_arn_escaped_in_the_path_is_served_signed_and_priced_by_its_id(
    served: Served,
) -> None:
    # AWS SDKs escape a model id in the path: an ARN's "/" as %2F, its ":" as %3A.
    arn = f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{MODEL}"
    escaped = arn.replace(":", "%3A").replace("/", "%2F")
    answer = _post(served.gateway, f"/bedrock/model/{escaped}/invoke", MESSAGES, served.secret)
    assert answer.status_code == 200, answer.text
    (call,) = served.calls()
    assert call["path"] == f"/bedrock/model/{arn.replace('/', '%2F')}/invoke"  # ":" unescaped
    (record,) = served.records()
    usage = call["usage"]
    assert record["actual_micros"] == _aws_micros(
        MODEL, usage["input_tokens"], usage["output_tokens"]
    )
    assert served.verified() == 1


def test_a_vertex_beta_header_counts_as_a_body_beta_does(served: Served) -> None:
    # Vertex takes Claude's betas as anthropic-beta headers: one the estimate does not know
    # counts as the context window, so this call no longer fits under the $1 cap.
    big = {**MESSAGES, "messages": [{"role": "user", "content": "x" * 400_000}]}
    answer = _post(
        served.gateway, VERTEX_PATH, big, served.secret, **{"anthropic-beta": "acme-fetch-2099"}
    )
    assert answer.status_code == 402, answer.text
    assert served.calls() == []


def test_a_server_tool_on_vertex_claude_goes_upstream_with_the_max_uses_its_fees_were_bounded_by(
    home: Path, tmp_path: Path
) -> None:
    fake = Clouds()
    secret = cloud_home(home, fake, cap_usd="50")  # the searches' content fills the window
    gateway = start_cloud_gateway(home, tmp_path, fake)
    try:
        body = {**MESSAGES, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}
        answer = _post(gateway, VERTEX_PATH, body, secret)
        assert answer.status_code == 200, answer.text
        sent = fake.get("/_control/last")["body"]
        assert sent["tools"][0]["max_uses"] == 5  # proxy.server_tool_max_uses
    finally:
        assert gateway.stop() == 0
        fake.stop()


def test_an_azure_chat_stream_asks_for_its_usage_and_is_recorded_at_it_not_its_estimate(
    served: Served,
) -> None:
    body = {"model": "prod-gpt5", "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    answer = _post(served.gateway, "/azure/openai/v1/chat/completions", body, served.secret)
    assert answer.status_code == 200, answer.text
    sent = served.fake.get("/_control/last")["body"]
    assert sent["stream_options"] == {"include_usage": True}
    assert "max_completion_tokens" in sent  # gpt-5 deployments refuse max_tokens
    assert "max_tokens" not in sent
    assert '"usage"' not in answer.text  # the client did not ask for the usage chunk
    (call,) = served.calls()
    (record,) = served.records()
    assert record["idempotency_key"] == f"azure:{call['id']}"
    usage = Usage(
        input_tokens=call["usage"]["prompt_tokens"],
        output_tokens=call["usage"]["completion_tokens"],
    )
    price = calc_price(usage, model_ref="gpt-5", provider_id="openai").total_price
    assert record["actual_micros"] == int(
        (Decimal(price) * 1_000_000).to_integral_value(rounding=ROUND_CEILING)
    )


def test_a_vertex_gemini_stream_without_alt_sse_is_passed_on_as_it_comes_and_recorded(
    served: Served,
) -> None:
    path = (
        "/vertex/v1/projects/p/locations/us-central1/publishers/google/models/"
        "gemini-2.5-flash:streamGenerateContent"
    )
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"maxOutputTokens": 100}}  # fmt: skip
    answer = _post(served.gateway, path, body, served.secret)
    assert answer.status_code == 200, answer.text
    assert answer.json()[0]["responseId"]
    # Relayed as the upstream sends it (chunked), not read whole and then answered.
    assert answer.headers.get("transfer-encoding") == "chunked"
    (call,) = served.calls()
    (record,) = served.records()
    usage = Usage(
        input_tokens=call["usage"]["promptTokenCount"],
        output_tokens=call["usage"]["candidatesTokenCount"],
    )
    price = calc_price(usage, model_ref="gemini-2.5-flash", provider_id="google").total_price
    assert record["actual_micros"] == int(
        (Decimal(price) * 1_000_000).to_integral_value(rounding=ROUND_CEILING)
    )
