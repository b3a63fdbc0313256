"""Bedrock, Vertex AI and Azure OpenAI wire formats: routes, estimates, and usage read from golden answers."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.core.cloud_models import price_candidates
from ledger.core.usage_objects import usage_tokens
from ledger.providers import RequestRefused, anthropic
from ledger.providers.anthropic import AnthropicUsageReader
from ledger.providers.azure import AzureRoute, azure_route, estimate_azure
from ledger.providers.bedrock import (
    BedrockRoute,
    ConverseReader,
    InvokeStreamReader,
    bedrock_route,
    estimate_bedrock,
    limited_converse_body,
    upstream_path,
)
from ledger.providers.vertex import estimate_vertex, upstream_base, vertex_route
from tests.fakes.clouds import chunk_frame

FIXTURES = Path(__file__).parents[2] / "fixtures" / "providers"
MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def test_bedrock_paths_name_their_model_with_its_colon_and_the_control_plane_is_free() -> None:
    assert bedrock_route("POST", f"/model/{MODEL}/invoke-with-response-stream") == BedrockRoute(
        "messages", MODEL, streamed=True
    )
    assert bedrock_route("POST", "/model/us.anthropic.x-v1%3A0/converse") == BedrockRoute(
        "converse", "us.anthropic.x-v1:0"
    )
    assert bedrock_route("POST", f"/model/{MODEL}/count-tokens") == BedrockRoute("free", MODEL)
    assert bedrock_route("GET", "/inference-profiles") == BedrockRoute("free", control=True)
    assert bedrock_route("GET", "/foundation-models") == BedrockRoute("free", control=True)
    assert bedrock_route("POST", "/foundation-models") is None
    assert bedrock_route("GET", f"/model/{MODEL}/invoke") is None
    assert bedrock_route("POST", "/model/x/delete") is None


def test_an_escaped_inference_profile_arn_is_one_model_id_and_goes_on_with_its_colons() -> None:
    arn = f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{MODEL}"
    sent = f"/model/{arn.replace(':', '%3A').replace('/', '%2F')}/invoke"
    assert bedrock_route("POST", sent) == BedrockRoute("messages", arn)
    assert upstream_path(sent) == f"/model/{arn.replace('/', '%2F')}/invoke"
    assert upstream_path(f"/model/{MODEL}/invoke") == f"/model/{MODEL}/invoke"


def test_vertex_and_azure_paths() -> None:
    base = "/v1/projects/p/locations/us-east5/publishers"
    found = vertex_route(
        "POST", f"{base}/anthropic/models/claude-opus-4-5@20251101:streamRawPredict"
    )
    assert found is not None
    assert (found.kind, found.model, found.streamed) == (
        "messages",
        "claude-opus-4-5@20251101",
        True,
    )
    counted = vertex_route("POST", f"{base}/anthropic/models/count-tokens:rawPredict")
    assert counted is not None
    assert counted.kind == "free"
    gemini = vertex_route("POST", f"{base}/google/models/gemini-2.5-pro:generateContent")
    assert gemini is not None
    assert gemini.kind == "generate_content"
    assert vertex_route("POST", f"{base}/anthropic/models/x:predict") is None
    assert upstream_base("global") == "https://aiplatform.googleapis.com"
    assert upstream_base("europe-west1") == "https://europe-west1-aiplatform.googleapis.com"
    assert azure_route("POST", "/openai/deployments/prod/chat/completions") == AzureRoute(
        "chat_completions", "prod"
    )
    assert azure_route("POST", "/openai/v1/responses") == AzureRoute("responses")
    assert azure_route("POST", "/openai/files") is None


def test_an_invoke_body_is_estimated_as_messages_and_goes_on_without_a_model() -> None:
    user = "user_abc_account__session_1b2c3d4e-0000-4000-8000-000000000000"
    body: dict[str, Any] = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 10,
            "messages": [{"role": "user", "content": "x" * 300}],
            "metadata": {"user_id": user}}  # fmt: skip
    estimate = estimate_bedrock(
        BedrockRoute("messages", MODEL, streamed=True), json.dumps(body).encode(),
        default_output_limit=None,
    )  # fmt: skip
    # The 300 characters' 100 tokens and Anthropic's framing for one request and message.
    framing = anthropic.REQUEST_TOKENS + anthropic.MESSAGE_TOKENS
    assert (estimate.provider, estimate.model) == ("bedrock", MODEL)
    assert estimate.input_tokens == 100 + framing
    assert estimate.stream
    assert "model" not in estimate.document
    assert estimate.metadata_user_id == user


def test_a_converse_body_is_estimated_by_its_own_fields_and_the_clamp_writes_max_tokens() -> None:
    body = {"system": [{"text": "s"}], "messages": [{"role": "user", "content": [{"text": "hi"}]}],
            "toolConfig": {"tools": [{"toolSpec": {"name": "t", "inputSchema": {"json": {}}}}]},
            "inferenceConfig": {"maxTokens": 500, "temperature": 0}}  # fmt: skip
    route = BedrockRoute("converse", MODEL)
    estimate = estimate_bedrock(route, json.dumps(body).encode(), default_output_limit=None)
    assert estimate.max_output_tokens == 500
    assert estimate.limit_given
    assert estimate.input_tokens > 0
    limited = json.loads(limited_converse_body(estimate.document, 64))
    assert limited["inferenceConfig"] == {"maxTokens": 64, "temperature": 0}
    with pytest.raises(RequestRefused, match=r"inferenceConfig\.maxTokens"):
        estimate_bedrock(route, b'{"messages": []}', default_output_limit=None)
    defaulted = estimate_bedrock(route, b'{"messages": []}', default_output_limit=900)
    assert (defaulted.max_output_tokens, defaulted.limit_given) == (900, False)


def test_an_azure_deployment_is_priced_as_its_mapped_model_and_an_unmapped_one_refused() -> None:
    body = json.dumps({"input": "hi", "max_output_tokens": 10}).encode()
    found = estimate_azure(AzureRoute("responses", "prod"), body, {"prod": "gpt-5"},
                           default_output_limit=None)  # fmt: skip
    assert (found.provider, found.model) == ("azure", "gpt-5")
    assert "model" not in found.document
    with pytest.raises(RequestRefused, match="'staging'"):
        estimate_azure(AzureRoute("responses", "staging"), body, {}, default_output_limit=None)


def test_cloud_model_ids_are_priced_from_the_clouds_entries_else_the_vendors() -> None:
    assert price_candidates("bedrock", MODEL) == (
        ("aws", MODEL), ("anthropic", "claude-sonnet-4-5-20250929"),
    )  # fmt: skip
    arn = f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{MODEL}"
    assert price_candidates("bedrock", arn)[0] == ("aws", MODEL)
    assert price_candidates("vertex", "claude-opus-4-5@20251101") == (
        ("google", "claude-opus-4-5@20251101"),
    )
    assert price_candidates("azure", "gpt-5") == (("azure", "gpt-5"), ("openai", "gpt-5"))


def test_the_golden_invoke_stream_is_read_to_its_usage_and_metrics() -> None:
    reader = InvokeStreamReader()
    ends = reader.feed_frames((FIXTURES / "bedrock_invoke_stream.bin").read_bytes())
    assert [ended for _end, ended in ends] == [False] * (len(ends) - 1) + [True]
    assert reader.finished
    assert not reader.unreadable
    assert reader.usage == {"input_tokens": 21919, "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 0, "output_tokens": 1389}  # fmt: skip
    assert reader.idempotency_key == "anthropic:msg_agent000001"


def test_invocation_metrics_stand_in_for_usage_the_events_lack() -> None:
    metrics = {"inputTokenCount": 7, "outputTokenCount": 3, "invocationLatency": 9}
    data = chunk_frame({"type": "message_start", "message": {"id": "msg_1", "model": MODEL}})
    data += chunk_frame({"type": "message_stop", "amazon-bedrock-invocationMetrics": metrics})
    reader = InvokeStreamReader()
    reader.feed_frames(data)
    assert reader.finished
    assert reader.usage == {"input_tokens": 7, "output_tokens": 3,
                            "cache_read_input_tokens": None, "cache_creation_input_tokens": None}  # fmt: skip
    assert reader.end(200).has_usage
    tokens = usage_tokens("bedrock", reader.usage)
    assert (tokens.input, tokens.output) == (7, 3)


def test_an_exception_frame_ends_the_stream_as_an_error() -> None:
    reader = InvokeStreamReader()
    ends = reader.feed_frames((FIXTURES / "bedrock_invoke_stream_error.bin").read_bytes())
    assert ends[-1][1] is True
    assert reader.error == "modelStreamErrorException: The model stream failed"
    assert not reader.finished
    assert reader.end(200).error


def test_converse_usage_from_json_and_from_the_stream_metadata() -> None:
    whole = ConverseReader()
    whole.feed_json((FIXTURES / "bedrock_converse.json").read_bytes())
    streamed = ConverseReader()
    streamed.feed_frames((FIXTURES / "bedrock_converse_stream.bin").read_bytes())
    assert whole.finished
    assert streamed.finished
    assert whole.usage == streamed.usage
    tokens = usage_tokens("bedrock", whole.usage)
    assert (tokens.input, tokens.cache_read, tokens.cache_write_5m, tokens.output) == (
        1234, 100, 50, 321,
    )  # fmt: skip


def test_vertex_sse_is_read_by_the_messages_reader() -> None:
    reader = AnthropicUsageReader()
    reader.provider = "vertex"
    reader.feed_sse((FIXTURES / "vertex_stream.sse").read_bytes())
    assert reader.finished
    assert reader.usage is not None
    assert reader.usage["output_tokens"] == 20
    assert usage_tokens("vertex", reader.usage).input == 300


def test_bytes_that_are_not_an_event_stream_are_unreadable_not_an_exception() -> None:
    reader = InvokeStreamReader()
    reader.feed_frames(b"\x00\x00\x00\x10" + b"garbage-garbage-garbage")
    assert reader.unreadable
    assert reader.broken


def test_a_converse_field_the_estimate_does_not_know_counts_as_the_context_window() -> None:
    """Converse is read as an allowlist: a field not listed (or a stored prompt) is unseen input."""
    known = {"messages": [{"role": "user", "content": [{"text": "hi"}]}],
             "inferenceConfig": {"maxTokens": 50}, "requestMetadata": {"team": "a"}}  # fmt: skip
    route = BedrockRoute("converse", MODEL)
    plain = estimate_bedrock(route, json.dumps(known).encode(), default_output_limit=None)
    assert not plain.unseen_input
    for extra in ({"promptVariables": {"topic": {"text": "x"}}}, {"someNewField": {"a": 1}}):
        body = json.dumps({**known, **extra}).encode()
        estimate = estimate_bedrock(route, body, default_output_limit=None)
        assert estimate.unseen_input, extra
        assert estimate.window_reasons == (f"request.{next(iter(extra))}",)


def test_an_invoke_bodys_own_betas_set_the_window_and_an_unknown_one_counts_it() -> None:
    """Bedrock and Vertex carry betas in the body: context-1m makes the window 1M there too."""
    body: dict[str, Any] = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    route = BedrockRoute("messages", MODEL)
    plain = estimate_bedrock(route, json.dumps(body).encode(), default_output_limit=None)
    assert (plain.context_window, plain.unseen_input) == (None, False)
    long = {**body, "anthropic_beta": ["context-1m-2025-08-07"]}
    wide = estimate_bedrock(route, json.dumps(long).encode(), default_output_limit=None)
    assert wide.context_window == 1_000_000
    unknown = {**body, "anthropic_beta": ["some-new-beta-2099-01-01"]}
    seen = estimate_bedrock(route, json.dumps(unknown).encode(), default_output_limit=None)
    assert seen.unseen_input
    assert seen.window_reasons == ("beta 'some-new-beta-2099-01-01'",)


def test_the_gateway_imports_neither_cloud_library_until_a_cloud_route_needs_it() -> None:
    # The [bedrock] and [vertex] extras: a gateway serving no cloud route runs without them.
    code = (
        "import json, sys\n"
        "import ledger.gateway.serve, ledger.gateway.clouds, ledger.edges.cloudauth\n"
        "import ledger.providers.bedrock, ledger.providers.vertex, ledger.cli\n"
        "print(json.dumps(sorted({m.split('.')[0] + ('.auth' if m.startswith('google.auth') "
        "else '') for m in sys.modules if m.startswith(('botocore', 'boto3', 'google.auth'))})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_betas_claude_code_sends_on_vertex_are_known_settings_and_an_unknown_one_is_not() -> (
    None
):
    # Claude Code 2.1.332 in Vertex mode, on every call.
    sent = "claude-code-20250219,interleaved-thinking-2025-05-14,web-search-2025-03-05,tool-search-tool-2025-10-19"
    found = vertex_route(
        "POST", "/v1/projects/p/locations/us-east5/publishers/anthropic/models/"
        "claude-sonnet-4-5@20250929:streamRawPredict",
    )  # fmt: skip
    assert found is not None
    body = json.dumps({"anthropic_version": "vertex-2023-10-16", "max_tokens": 10,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()  # fmt: skip
    known = estimate_vertex(found, body, default_output_limit=None,
                            headers=[("anthropic-beta", sent)])  # fmt: skip
    assert known.window_reasons == ()
    unknown = estimate_vertex(found, body, default_output_limit=None,
                              headers=[("anthropic-beta", "acme-fetch-2099")])  # fmt: skip
    assert unknown.window_reasons == ("beta 'acme-fetch-2099'",)
