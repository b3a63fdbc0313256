"""Usage read from JSON bodies and SSE streams, as each provider documents them."""

import pytest

from ledger.core.usage_objects import usage_tokens
from ledger.providers import Route, UsageReader
from tests.unit.providers.fixtures import fixture

MESSAGES = Route("anthropic", "messages")
CHAT = Route("openai", "chat_completions")
RESPONSES = Route("openai", "responses")

ANTHROPIC_START = {
    "input_tokens": 25,
    "cache_creation_input_tokens": 1200,
    "cache_read_input_tokens": 3000,
    "cache_creation": {"ephemeral_5m_input_tokens": 1200, "ephemeral_1h_input_tokens": 0},
    "output_tokens": 1,
    "service_tier": "standard",
}
CHAT_USAGE = {
    "prompt_tokens": 1117,
    "completion_tokens": 46,
    "total_tokens": 1163,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {
        "reasoning_tokens": 0,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    },
}
RESPONSES_USAGE = {
    "input_tokens": 328,
    "input_tokens_details": {"cached_tokens": 128},
    "output_tokens": 52,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 380,
}
RESPONSE_ID = "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b"
CHAT_ID = "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"

# fixture, route, usage, response id, model, error, finished
STREAMS = {
    "anthropic_stream.sse": (
        MESSAGES, {**ANTHROPIC_START, "output_tokens": 15}, "msg_01XFDUDYJgAACzvnptvVoYEL",
        "claude-sonnet-4-5-20250929", None, True,
    ),
    "anthropic_stream_error.sse": (
        MESSAGES, ANTHROPIC_START, "msg_01XFDUDYJgAACzvnptvVoYEL",
        "claude-sonnet-4-5-20250929", "overloaded_error: Overloaded", False,
    ),
    "anthropic_stream_cut.sse": (
        MESSAGES, ANTHROPIC_START, "msg_01XFDUDYJgAACzvnptvVoYEL",
        "claude-sonnet-4-5-20250929", None, False,
    ),
    # The response's own service_tier is carried into its usage, for the record's price.
    "chat_stream.sse": (
        CHAT, {**CHAT_USAGE, "service_tier": "default"}, CHAT_ID, "gpt-4.1-2025-04-14", None,
        True,
    ),
    "chat_stream_no_usage.sse": (CHAT, None, CHAT_ID, "gpt-4.1-2025-04-14", None, True),
    "chat_stream_error.sse": (
        CHAT, None, CHAT_ID, "gpt-4.1-2025-04-14",
        "server_error: The server had an error while processing your request.", False,
    ),
    "responses_stream.sse": (
        RESPONSES, RESPONSES_USAGE, RESPONSE_ID, "gpt-4.1-2025-04-14", None, True,
    ),
    "responses_stream_incomplete.sse": (
        RESPONSES, {**RESPONSES_USAGE, "output_tokens": 256, "total_tokens": 584},
        RESPONSE_ID, "gpt-4.1-2025-04-14", None, True,
    ),
    "responses_stream_failed.sse": (
        RESPONSES, {**RESPONSES_USAGE, "output_tokens": 1, "total_tokens": 329}, RESPONSE_ID,
        "gpt-4.1-2025-04-14", "server_error: The model failed to generate a response.", True,
    ),
    "responses_stream_error.sse": (
        RESPONSES, None, RESPONSE_ID, "gpt-4.1-2025-04-14",
        "ERR_SOMETHING: Something went wrong", False,
    ),
}  # fmt: skip


def read_stream(route: Route, chunks: list[bytes]) -> UsageReader:
    reader = UsageReader.for_route(route)
    for chunk in chunks:
        reader.feed_sse(chunk)
    return reader


def outcome(reader: UsageReader) -> tuple[object, ...]:
    return reader.usage, reader.response_id, reader.model, reader.error, reader.finished


class TestStreams:
    @pytest.mark.parametrize("name", sorted(STREAMS))
    def test_golden_stream(self, name):
        """Usage accumulates event by event; errors and the terminal event are reported."""
        route, *expected = STREAMS[name]
        assert outcome(read_stream(route, [fixture(name)])) == tuple(expected)

    @pytest.mark.parametrize("name", sorted(STREAMS))
    def test_one_byte_at_a_time(self, name):
        """Fed byte by byte, every stream reads the same."""
        raw = fixture(name)
        route, *expected = STREAMS[name]
        reader = read_stream(route, [raw[index : index + 1] for index in range(len(raw))])
        assert outcome(reader) == tuple(expected)

    def test_anthropic_usage_prices_every_token_kind_once(self):
        """The accumulated object is one ``ledger record --usage-json`` reads."""
        reader = read_stream(MESSAGES, [fixture("anthropic_stream.sse")])
        counts = usage_tokens("anthropic", reader.usage)
        assert (counts.input, counts.cache_write_5m, counts.cache_read, counts.output) == (
            25, 1200, 3000, 15,
        )  # fmt: skip

    def test_message_delta_may_update_input_counts(self):
        """Later ``message_delta`` usage fields replace earlier ones; nulls do not erase them."""
        stream = (
            b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","model":"c",'
            b'"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
            b'event: message_delta\ndata: {"type":"message_delta","delta":{},'
            b'"usage":{"input_tokens":9,"output_tokens":40,"cache_read_input_tokens":null}}\n\n'
        )
        reader = read_stream(MESSAGES, [stream])
        assert reader.usage == {"input_tokens": 9, "output_tokens": 40}
        assert not reader.finished

    def test_usage_is_a_copy(self):
        """Changing the returned object does not change what the reader holds."""
        reader = read_stream(CHAT, [fixture("chat_stream.sse")])
        reader.usage["prompt_tokens"] = 0  # type: ignore[index]
        assert reader.usage == {**CHAT_USAGE, "service_tier": "default"}

    def test_garbage_events_are_ignored(self):
        """Events that are not JSON objects carry no usage and raise nothing."""
        reader = read_stream(CHAT, [b"data: {not json\n\ndata: [1]\n\ndata: 7\n\n"])
        assert outcome(reader) == (None, None, None, None, False)


class TestJson:
    def test_anthropic_message(self):
        """A whole message: its usage, id and model."""
        reader = UsageReader.for_route(MESSAGES)
        reader.feed_json(fixture("anthropic_message.json"))
        assert outcome(reader) == (
            {**ANTHROPIC_START, "output_tokens": 15}, "msg_01XFDUDYJgAACzvnptvVoYEL",
            "claude-sonnet-4-5-20250929", None, True,
        )  # fmt: skip

    def test_chat_completion(self):
        """A whole chat completion."""
        reader = UsageReader.for_route(CHAT)
        reader.feed_json(fixture("chat_completion.json"))
        served = {**CHAT_USAGE, "service_tier": "default"}  # the response's tier, for the price
        assert outcome(reader) == (served, CHAT_ID, "gpt-4.1-2025-04-14", None, True)

    def test_response(self):
        """A whole Responses API response."""
        reader = UsageReader.for_route(RESPONSES)
        reader.feed_json(fixture("responses_response.json"))
        assert outcome(reader) == (
            RESPONSES_USAGE, RESPONSE_ID, "gpt-4.1-2025-04-14", None, True,
        )  # fmt: skip

    @pytest.mark.parametrize(
        ("route", "name", "error"),
        [
            (MESSAGES, "anthropic_error.json", "overloaded_error: Overloaded"),
            (
                CHAT, "openai_error.json",
                "tokens: Rate limit reached for gpt-4.1 in organization org-123 on tokens per min (TPM).",
            ),
        ],
    )  # fmt: skip
    def test_error_bodies(self, route, name, error):
        """An error body has no usage and is not a finished response."""
        reader = UsageReader.for_route(route)
        reader.feed_json(fixture(name))
        assert outcome(reader) == (None, None, None, error, False)

    @pytest.mark.parametrize("raw", [b"", b"<html>bad gateway</html>", b"[]", b"\xff"])
    def test_body_that_is_not_a_json_object(self, raw):
        """A proxy's HTML page or garbage is unreadable, never an exception."""
        reader = UsageReader.for_route(MESSAGES)
        reader.feed_json(raw)
        assert reader.usage is None
        assert reader.unreadable
        assert not reader.finished

    def test_free_route_has_no_reader(self):
        """count_tokens and the model list report no usage."""
        with pytest.raises(ValueError, match="no usage"):
            UsageReader.for_route(Route("anthropic", "free"))


class TestIdempotencyKey:
    def test_key_names_the_provider_and_response(self):
        """The gateway and the SDK guards key a record by the same text."""
        reader = read_stream(RESPONSES, [fixture("responses_stream.sse")])
        assert reader.idempotency_key == f"openai:{RESPONSE_ID}"

    def test_no_or_unusable_id_gives_no_key(self):
        """Without a response id (or one the chain cannot hold as a key), there is none."""
        assert UsageReader.for_route(MESSAGES).idempotency_key is None
        reader = UsageReader.for_route(MESSAGES)
        reader.feed_json(b'{"id": "msg 1/2", "usage": {"input_tokens": 1, "output_tokens": 1}}')
        assert reader.idempotency_key is None
