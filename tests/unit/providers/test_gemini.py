"""The Gemini API: its routes, the estimate of a request, usage from JSON and SSE, its error body."""

import json

import pytest

from ledger.core.usage_objects import usage_tokens
from ledger.providers import Route, error_body, estimate_request, gemini, route
from ledger.providers.usage import UsageReader
from tests.unit.providers.fixtures import fixture

GENERATE = Route("google", "generate_content", model="gemini-2.5-flash")
USAGE = {
    "promptTokenCount": 1843,
    "candidatesTokenCount": 9,
    "totalTokenCount": 2101,
    "thoughtsTokenCount": 249,
}


def utf8(*texts: str) -> int:
    return sum(len(text.encode("utf-8")) for text in texts)


def compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class TestRoutes:
    @pytest.mark.parametrize(
        ("method", "path", "expected"),
        [
            ("POST", "/v1beta/models/gemini-2.5-pro:generateContent",
             Route("google", "generate_content", model="gemini-2.5-pro")),
            ("POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
             Route("google", "generate_content", model="gemini-2.5-flash", streamed=True)),
            ("POST", "/v1beta/models/gemini-2.5-flash:countTokens", Route("google", "free")),
            ("GET", "/v1beta/models", Route("google", "free")),
            ("GET", "/v1beta/models/gemini-2.5-flash", Route("google", "free")),
        ],
    )  # fmt: skip
    def test_model_calls_are_gated_and_the_rest_free(self, method, path, expected):
        """generateContent and streamGenerateContent are model calls; counting and listing free."""
        assert route(method, path) == expected

    @pytest.mark.parametrize(
        ("method", "path"),
        [
            ("POST", "/v1beta/models/gemini-2.5-flash:batchGenerateContent"),
            ("POST", "/v1beta/models/gemini-embedding-001:embedContent"),
            ("POST", "/v1beta/models"),
            ("GET", "/v1beta/models/gemini-2.5-flash:generateContent"),
            ("POST", "/v1beta/cachedContents"),
            ("POST", "/v1beta/files"),
        ],
    )
    def test_paid_endpoints_not_named_are_unknown(self, method, path):
        """Batches, embeddings, caches and files are never taken for free endpoints."""
        assert route(method, path) is None


def test_the_estimate_counts_every_text_part_and_an_image():
    """System instruction, text, calls, responses, declarations ÷ 3; an image by its tiles."""
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    sent = utf8(
        "You are a careful coding assistant.",
        "What is in this picture? Ünïcödé ✓",
        "read_file", compact({"path": "README.md"}),
        "read_file", compact({"output": "# ledger"}),
        "CiQBcsjafE2v",  # the thought signature, read back by the model
        "read_file", "Read a file from the workspace", compact(schema),
    )  # fmt: skip
    estimate = estimate_request(GENERATE, fixture("gemini_request.json"))
    assert estimate.provider == "google"
    assert estimate.model == "gemini-2.5-flash"
    # A 1×1 image is one tile; the instruction and three contents, one declaration framed.
    frame = gemini.REQUEST_TOKENS + 4 * gemini.CONTENT_TOKENS + gemini.TOOL_TOKENS
    assert estimate.input_tokens == -(-sent // 3) + gemini.IMAGE_TILE_TOKENS + frame
    assert estimate.max_output_tokens == 8192
    assert estimate.stream is False
    streamed = Route("google", "generate_content", model="gemini-2.5-flash", streamed=True)
    assert estimate_request(streamed, fixture("gemini_request.json")).stream is True


def test_a_json_answer_gives_usage_and_the_response_id():
    """usageMetadata and responseId; thoughts are output, the cached part is a cache read."""
    reader = UsageReader.for_route(GENERATE)
    reader.feed_json(fixture("gemini_response.json"))
    assert reader.finished
    assert reader.error is None
    assert reader.idempotency_key == "google:yLSQaKCdLsOEz7IPmMz24Qk"
    assert reader.model == "gemini-2.5-flash"
    tokens = usage_tokens("google", reader.usage)
    assert (tokens.input, tokens.cache_read, tokens.output) == (819, 1024, 258)


def test_an_sse_stream_gives_the_last_usage_and_finishes_at_finish_reason():
    """Each chunk carries the usage so far; the one with finishReason ends the call."""
    reader = UsageReader.for_route(GENERATE)
    data = fixture("gemini_stream.sse")
    first_end = data.index(b"\r\n\r\n") + 4
    reader.feed_sse(data[:first_end])
    assert not bool(reader.finished)  # bool(): mypy would keep the attribute narrowed
    reader.feed_sse(data[first_end:])
    assert reader.finished
    usage = reader.usage
    assert usage is not None
    assert usage == {**USAGE, "promptTokensDetails": usage["promptTokensDetails"]}
    assert reader.idempotency_key == "google:0LWQaO6zH5-Az7IPgPq0-Qk"


def test_a_stream_without_alt_sse_is_one_json_array():
    """Without alt=sse the chunks come as one JSON array: read whole."""
    chunks = [
        json.loads(line.removeprefix("data: "))
        for line in fixture("gemini_stream.sse").decode().split("\r\n\r\n")
        if line
    ]
    reader = UsageReader.for_route(GENERATE)
    reader.feed_json(json.dumps(chunks).encode())
    assert reader.finished
    assert reader.usage is not None
    assert reader.usage["candidatesTokenCount"] == 9


def test_an_error_body_is_an_error():
    """Gemini's own error shape is read as an error, and the gateway answers in it."""
    reader = UsageReader.for_route(GENERATE)
    reader.feed_json(fixture("gemini_error.json"))
    assert reader.error is not None
    assert not reader.finished
    body = error_body("google", "budget_exceeded", "ledger: halt-100", 402)
    assert body == {
        "error": {"code": 402, "message": "ledger: halt-100", "status": "RESOURCE_EXHAUSTED"}
    }
