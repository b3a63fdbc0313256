"""guard_client with the official SDKs talking to a local server that answers like the providers.

The guard sits in the client's HTTP transport, so every SDK path that sends a
model request is gated, and the chain holds exactly what each response used.
"""

import asyncio
import logging
import warnings

import anthropic
import httpx2
import openai
import pytest

import ledger
from ledger.integrations import anthropic as guard_anthropic
from ledger.integrations import openai as guard_openai
from ledger.providers import anthropic as provider_anthropic
from ledger.providers import openai as provider_openai
from ledger.services.gate.referenced import DEFAULT_CONTEXT_WINDOW
from tests.fakes.provider import FakeProvider
from tests.gate_helpers import events_of

PRICES = """
[prices."anthropic/test-model"]
input_per_mtok = 3
output_per_mtok = 15
cache_read_per_mtok = 0.3
cache_write_per_mtok = 3.75
cache_write_1h_per_mtok = 6

[prices."openai/test-gpt"]
input_per_mtok = 2.5
output_per_mtok = 10
cache_read_per_mtok = 1.25
"""
# 1000×3 + 2000×3.75 + 1000×6 + 5000×0.3 + 700×15
ANTHROPIC_MICROS = 28_500
# message_start alone: the same input, 1 output token instead of 700
ANTHROPIC_START_MICROS = ANTHROPIC_MICROS - 699 * 15
# 800×2.5 + 1200×1.25 + 500×10
CHAT_MICROS = 8_500
# 2000×2.5 + 1000×1.25 + 900×10
RESPONSES_MICROS = 15_250
MESSAGES = [{"role": "user", "content": "héllo there"}]  # 12 UTF-8 bytes: 4 tokens
# Each provider's framing: per request and per message.
CLAUDE_FRAME = provider_anthropic.REQUEST_TOKENS + provider_anthropic.MESSAGE_TOKENS
OPENAI_FRAME = provider_openai.REQUEST_TOKENS + provider_openai.MESSAGE_TOKENS
ASK = {"model": "test-model", "max_tokens": 800, "messages": MESSAGES}
ASK_INPUT = 4 + CLAUDE_FRAME
# (4 + framing)×3 + 800×15
ASK_ESTIMATE = ASK_INPUT * 3 + 12_000
CHAT = {"model": "test-gpt", "max_completion_tokens": 600, "messages": MESSAGES}
# (4 + framing)×2.5 + 600×10, rounded up
CHAT_ESTIMATE = -(-(4 + OPENAI_FRAME) * 5 // 2) + 6_000


@pytest.fixture
def server():
    running = FakeProvider(detailed_usage=True)
    yield running
    for client in running.clients:
        client.close()
    running.close()


@pytest.fixture
def book(home, monkeypatch):
    monkeypatch.setenv("LEDGER_NOW", "2026-03-01T12:00:00Z")
    monkeypatch.setenv("LEDGER_BILLING_STALE_HALT_PCT", "100")
    path = home / "ledger.toml"
    path.write_text(path.read_text() + PRICES)
    return ledger.open(home)


def records(home):
    return [entry["payload"] for entry in events_of(home, "budget.record_call")]


def verdicts(home):
    return [entry["payload"] for entry in events_of(home, "budget.allow")] + [
        entry["payload"] for entry in events_of(home, "budget.warn_90")
    ]


def micros(home):
    return [record["actual_micros"] for record in records(home)]


def anthropic_client(server, book, *, max_retries=0, **guard):
    raw = anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=max_retries)
    server.clients.append(raw)
    return guard_anthropic.guard_client(raw, book, **guard)


def openai_client(server, book, **guard):
    raw = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    server.clients.append(raw)
    return guard_openai.guard_client(raw, book, **guard)


def assert_settled(book, home, expected):
    """Each record settles its verdict, and nothing stays reserved."""
    assert micros(home) == expected
    assert all(record["settled"] and record["verdict_ref"] for record in records(home))
    assert book.usage().usd_reserved_micros == 0
    assert book.usage().usd_used_micros == sum(expected)


class TestAnthropicPaths:
    def test_create_runs_a_verdict_on_the_estimate_then_records_usage(self, server, book, home):
        client = anthropic_client(server, book)
        message = client.messages.create(**ASK)
        assert message.content[0].text == "hello"
        [verdict] = verdicts(home)
        assert (verdict["input_tokens"], verdict["max_output_tokens"]) == (ASK_INPUT, 800)
        assert verdict["estimated_micros"] == ASK_ESTIMATE
        [record] = records(home)
        assert record["idempotency_key"] == f"anthropic:{message.id}"
        assert record["model_id"] == "test-model"
        assert_settled(book, home, [ANTHROPIC_MICROS])

    def test_a_document_by_url_is_estimated_at_the_context_window(self, server, book, home):
        """The guard sizes input it cannot see as the gateway does: never as free."""
        document = {"type": "document", "source": {"type": "url", "url": "https://x.example/a.pdf"}}
        ask = {**ASK, "messages": [{"role": "user", "content": [document]}]}
        anthropic_client(server, book).messages.create(**ask)
        [verdict] = verdicts(home)
        assert verdict["input_tokens"] == DEFAULT_CONTEXT_WINDOW
        assert verdict["estimated_micros"] == DEFAULT_CONTEXT_WINDOW * 3 + 800 * 15

    def test_stream_is_recorded_when_it_ends(self, server, book, home):
        stream = anthropic_client(server, book).messages.create(**ASK, stream=True)
        assert records(home) == []
        kinds = [event.type for event in stream]
        assert (kinds[0], kinds[-1]) == ("message_start", "message_stop")
        assert_settled(book, home, [ANTHROPIC_MICROS])

    def test_stream_helper(self, server, book, home):
        with anthropic_client(server, book).messages.stream(**ASK) as stream:
            assert stream.get_final_message().usage.output_tokens == 700
        assert_settled(book, home, [ANTHROPIC_MICROS])

    def test_stream_closed_early_records_what_was_received(self, server, book, home):
        server.scenarios = ["hold"]  # message_start arrives; the rest waits
        with anthropic_client(server, book).messages.create(**ASK, stream=True) as stream:
            assert next(iter(stream)).type == "message_start"
        assert_settled(book, home, [ANTHROPIC_START_MICROS])

    def test_stream_closed_early_costs_at_least_its_estimate(self, server, book, home):
        """Closed before its final usage: the larger of the estimate and the usage received."""
        server.scenarios = ["hold"]
        ask = {**ASK, "max_tokens": 8000}  # estimate above message_start's usage
        with anthropic_client(server, book).messages.create(**ask, stream=True) as stream:
            assert next(iter(stream)).type == "message_start"
        assert_settled(book, home, [ASK_INPUT * 3 + 8000 * 15])

    def test_raw_response(self, server, book, home):
        raw = anthropic_client(server, book).messages.with_raw_response.create(**ASK)
        assert raw.parse().usage.output_tokens == 700
        assert_settled(book, home, [ANTHROPIC_MICROS])

    def test_streaming_response_closed_unread_still_records_the_usage(self, server, book, home):
        client = anthropic_client(server, book)
        with client.messages.with_streaming_response.create(**ASK) as response:
            assert response.http_request.url.path == "/v1/messages"
        assert_settled(book, home, [ANTHROPIC_MICROS])

    def test_with_options_copy_and_beta_are_gated(self, server, book, home):
        client = anthropic_client(server, book)
        client.with_options(timeout=30).messages.create(**ASK)
        client.copy(max_retries=0).messages.create(**ASK)
        client.beta.messages.create(**ASK)
        assert len(verdicts(home)) == 3
        assert_settled(book, home, [ANTHROPIC_MICROS] * 3)

    def test_free_endpoints_pass_ungated(self, server, book, home):
        client = anthropic_client(server, book)
        assert (
            client.messages.count_tokens(model="test-model", messages=MESSAGES).input_tokens == 12
        )
        client.models.list()
        assert verdicts(home) == []
        assert records(home) == []
        assert len(server.requests) == 2

    def test_gzip_response_is_read(self, server, book, home):
        server.scenarios = ["gzip"]
        assert anthropic_client(server, book).messages.create(**ASK).usage.output_tokens == 700
        assert_settled(book, home, [ANTHROPIC_MICROS])

    def test_unreadable_usage_is_recorded_at_the_estimate(self, server, book, home):
        """Spend is never dropped: a usage object the ledger cannot read counts as the estimate."""
        server.scenarios = ["bad-usage"]
        assert anthropic_client(server, book).messages.create(**ASK).usage.input_tokens == -1
        assert_settled(book, home, [ASK_ESTIMATE])

    def test_session_and_agent_scope_the_call(self, server, book, home):
        anthropic_client(server, book, session="s-1", agent="researcher").messages.create(**ASK)
        [verdict] = verdicts(home)
        assert (verdict["cycle_id"], verdict["agent"]) == ("s-1", "researcher")
        assert records(home)[0]["cycle_id"] == "s-1"


class TestAnthropicFailures:
    def test_error_event_mid_stream_records_the_usage_received(self, server, book, home):
        server.scenarios = ["error"]
        stream = anthropic_client(server, book).messages.create(**ASK, stream=True)
        with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
            list(stream)
        assert_settled(book, home, [ANTHROPIC_START_MICROS])

    def test_dropped_connection_mid_stream_records_at_least_the_usage_received(
        self, server, book, home
    ):
        server.scenarios = ["cut"]
        stream = anthropic_client(server, book).messages.create(**ASK, stream=True)
        with pytest.raises(httpx2.RemoteProtocolError):
            list(stream)
        assert_settled(book, home, [ANTHROPIC_START_MICROS])

    def test_dropped_connection_mid_body_settles_at_its_estimate(self, server, book, home):
        """The answer had begun: a cut never makes it cheaper than its estimate."""
        server.scenarios = ["cut"]
        with pytest.raises(anthropic.APIConnectionError):
            anthropic_client(server, book).messages.create(**ASK)
        assert_settled(book, home, [ASK_ESTIMATE])

    def test_unreachable_server_settles_at_zero(self, server, book, home):
        url = server.url
        server.close()  # nothing listens there any more
        raw = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0)
        with pytest.raises(anthropic.APIConnectionError):
            guard_anthropic.guard_client(raw, book).messages.create(**ASK)
        raw.close()
        assert_settled(book, home, [0])

    @pytest.mark.parametrize("status", ["529", "500"])
    def test_error_status_settles_at_zero(self, server, book, home, status):
        server.scenarios = [f"status:{status}"]
        with pytest.raises(anthropic.APIStatusError) as caught:
            anthropic_client(server, book).messages.create(**ASK)
        assert caught.value.status_code == int(status)
        assert_settled(book, home, [0])

    def test_each_retry_is_its_own_call(self, server, book, home):
        server.scenarios = ["status:529"]
        client = anthropic_client(server, book, max_retries=1)
        assert client.messages.create(**ASK).usage.output_tokens == 700
        assert len(verdicts(home)) == 2
        assert_settled(book, home, [0, ANTHROPIC_MICROS])

    @pytest.mark.usefixtures("book")
    def test_halt_raises_and_sends_nothing(self, server, home, monkeypatch):
        monkeypatch.setenv("LEDGER_USD_DAILY_CAP", "0.001")
        client = anthropic_client(server, ledger.open(home), max_retries=2)
        with pytest.raises(ledger.BudgetHalted) as caught:
            client.messages.create(**ASK)
        halted = caught.value
        assert isinstance(halted, anthropic.AnthropicError)  # the SDK neither retries nor wraps it
        assert halted.verdict.verdict == "halt-100"
        assert str(halted) == (
            f"halt-100 (projected {ASK_ESTIMATE / 10:.1f} % of the cap): the deciding cap aggregate of $0.001 has $0.00 used and $0.00 reserved, "
            f"and this call's estimate is ${ASK_ESTIMATE / 1e6:.6f}"
        )
        assert server.requests == []
        assert len(events_of(home, "budget.halt_100")) == 1
        assert records(home) == []

    @pytest.mark.usefixtures("book")
    def test_warn_90_warns_and_logs(self, server, home, monkeypatch, caplog):
        monkeypatch.setenv("LEDGER_USD_DAILY_CAP", "0.013")
        client = anthropic_client(server, ledger.open(home))
        with caplog.at_level(logging.WARNING, logger="ledger"):
            with pytest.warns(ledger.BudgetWarning, match="warn-90"):
                client.messages.create(**ASK)
        assert any("warn-90" in r.getMessage() for r in caplog.records if r.name == "ledger")
        assert len(server.model_requests()) == 1

    @pytest.mark.usefixtures("book")
    def test_warn_90_made_an_error_sends_nothing_and_holds_nothing(self, server, home, monkeypatch):
        monkeypatch.setenv("LEDGER_USD_DAILY_CAP", "0.013")
        book = ledger.open(home)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ledger.BudgetWarning)
            with pytest.raises(ledger.BudgetWarning):
                anthropic_client(server, book, max_retries=2).messages.create(**ASK)
        assert server.requests == []
        assert len(events_of(home, "budget.warn_90")) == 1
        assert_settled(book, home, [0])

    def test_async_client(self, server, book, home):
        raw = anthropic.AsyncAnthropic(base_url=server.url, api_key="test", max_retries=0)
        client = guard_anthropic.guard_client(raw, book)
        server.scenarios = ["ok", "ok", "error", "status:500"]

        async def main():
            await client.messages.create(**ASK)
            stream = await client.messages.create(**ASK, stream=True)
            async for _event in stream:
                pass
            stream = await client.messages.create(**ASK, stream=True)
            with pytest.raises(anthropic.APIStatusError):
                async for _event in stream:
                    pass
            with pytest.raises(anthropic.InternalServerError):
                await client.with_options(timeout=9).messages.create(**ASK)
            await client.close()

        asyncio.run(main())
        assert_settled(book, home, [ANTHROPIC_MICROS, ANTHROPIC_MICROS, ANTHROPIC_START_MICROS, 0])

    @pytest.mark.usefixtures("book")
    def test_async_halt_sends_nothing(self, server, home, monkeypatch):
        monkeypatch.setenv("LEDGER_USD_DAILY_CAP", "0")
        raw = anthropic.AsyncAnthropic(base_url=server.url, api_key="test")
        client = guard_anthropic.guard_client(raw, ledger.open(home))

        async def main():
            with pytest.raises(ledger.BudgetHalted):
                await client.messages.create(**ASK)
            await client.close()

        asyncio.run(main())
        assert server.requests == []


class TestOpenAI:
    def test_chat_completion(self, server, book, home):
        reply = openai_client(server, book).chat.completions.create(**CHAT)
        assert reply.choices[0].message.content == "hello"
        [record] = records(home)
        assert record["tokens"]["reasoning"] == 200
        assert record["idempotency_key"] == f"openai:{reply.id}"
        assert_settled(book, home, [CHAT_MICROS])

    def test_chat_parse(self, server, book, home):
        parsed = openai_client(server, book).chat.completions.parse(**CHAT)
        assert parsed.choices[0].message.content == "hello"
        assert_settled(book, home, [CHAT_MICROS])

    def test_chat_stream_with_usage(self, server, book, home):
        stream = openai_client(server, book).chat.completions.create(
            **CHAT, stream=True, stream_options={"include_usage": True}
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert text == "hello"
        assert_settled(book, home, [CHAT_MICROS])

    def test_chat_stream_without_usage_is_recorded_at_its_estimate(self, server, book, home):
        list(openai_client(server, book).chat.completions.create(**CHAT, stream=True))
        assert verdicts(home)[0]["estimated_micros"] == CHAT_ESTIMATE
        assert_settled(book, home, [CHAT_ESTIMATE])

    def test_responses_create_and_stream(self, server, book, home):
        client = openai_client(server, book)
        client.responses.create(model="test-gpt", max_output_tokens=900, input="héllo")
        events = list(
            client.responses.create(
                model="test-gpt", max_output_tokens=900, input="héllo", stream=True
            )
        )
        assert events[-1].type == "response.completed"
        with client.responses.stream(model="test-gpt", max_output_tokens=900, input="hé") as s:
            assert s.get_final_response().usage.output_tokens == 900
        frame = provider_openai.REQUEST_TOKENS
        assert [v["input_tokens"] for v in verdicts(home)] == [2 + frame, 2 + frame, 1 + frame]
        assert_settled(book, home, [RESPONSES_MICROS] * 3)

    def test_streaming_response_and_copy(self, server, book, home):
        client = openai_client(server, book).copy(timeout=20)
        with client.chat.completions.with_streaming_response.create(**CHAT) as response:
            assert response.parse().usage.total_tokens == 2500
        assert_settled(book, home, [CHAT_MICROS])

    def test_no_output_limit_is_refused_before_sending(self, server, book, home):
        client = openai_client(server, book)
        with pytest.raises(ledger.UsageError, match="no output limit") as caught:
            client.chat.completions.create(model="test-gpt", messages=MESSAGES)
        assert isinstance(caught.value, openai.OpenAIError)
        assert server.requests == []
        assert verdicts(home) == []

    def test_error_status_settles_at_zero(self, server, book, home):
        server.scenarios = ["status:500"]
        with pytest.raises(openai.InternalServerError):
            openai_client(server, book).responses.create(
                model="test-gpt", max_output_tokens=9, input="x"
            )
        assert_settled(book, home, [0])

    @pytest.mark.usefixtures("book")
    def test_halt_sends_nothing(self, server, home, monkeypatch):
        monkeypatch.setenv("LEDGER_USD_PROVIDER_CAPS", '{"openai": 0.001}')
        with pytest.raises(ledger.BudgetHalted, match="deciding cap provider:openai"):
            openai_client(server, ledger.open(home)).chat.completions.create(**CHAT)
        assert server.requests == []

    def test_async_chat_and_responses_stream(self, server, book, home):
        raw = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        client = guard_openai.guard_client(raw, book)

        async def main():
            await client.chat.completions.create(**CHAT)
            stream = await client.responses.create(
                model="test-gpt", max_output_tokens=900, input="héllo", stream=True
            )
            async for _event in stream:
                pass
            await client.close()

        asyncio.run(main())
        assert_settled(book, home, [CHAT_MICROS, RESPONSES_MICROS])
