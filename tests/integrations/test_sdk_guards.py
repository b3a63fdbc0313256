"""guard_client with the real official SDKs talking to a local server (SPEC §7)."""

import asyncio
import json

import anthropic
import openai
import pytest

import ledger
from ledger.integrations import anthropic as guard_anthropic
from ledger.integrations import openai as guard_openai
from tests.gate_helpers import env_at, events_of
from tests.integrations.provider_server import ProviderServer

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
# 800×2.5 + 1200×1.25 + 500×10
CHAT_MICROS = 8_500
# 2000×2.5 + 1000×1.25 + 900×10
RESPONSES_MICROS = 15_250
MESSAGES = [{"role": "user", "content": "héllo there"}]


@pytest.fixture
def server():
    running = ProviderServer()
    yield running
    for client in running.clients:
        client.close()
    running.close()


@pytest.fixture
def book(home, monkeypatch):
    for key, value in env_at().items():
        monkeypatch.setenv(key, value)
    path = home / "ledger.toml"
    path.write_text(path.read_text() + PRICES)
    return ledger.open(home)


def records(home):
    return [entry["payload"] for entry in events_of(home, "budget.record_call")]


def anthropic_client(server):
    client = anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0)
    server.clients.append(client)
    return client


def openai_client(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    server.clients.append(client)
    return client


class TestAnthropic:
    def test_create_runs_a_verdict_then_records_usage(self, server, book, home):
        client = guard_anthropic.guard_client(anthropic_client(server), book)
        message = client.messages.create(model="test-model", max_tokens=800, messages=MESSAGES)
        assert message.content[0].text == "hello"
        verdict = events_of(home, "budget.allow")[0]["payload"]
        # "héllo there" in the messages JSON: its UTF-8 bytes ÷ 3, rounded up
        size = len(json.dumps(MESSAGES, ensure_ascii=False).encode())
        assert verdict["input_tokens"] == -(-size // 3)
        assert verdict["max_output_tokens"] == 800
        [record] = records(home)
        assert record["actual_micros"] == ANTHROPIC_MICROS
        assert record["settled"] is True
        assert record["idempotency_key"].startswith("guard:")

    def test_stream_is_recorded_when_it_ends(self, server, book, home):
        client = guard_anthropic.guard_client(anthropic_client(server), book)
        stream = client.messages.create(
            model="test-model", max_tokens=800, messages=MESSAGES, stream=True
        )
        kinds = [event.type for event in stream]
        assert kinds[0] == "message_start"
        assert kinds[-1] == "message_stop"
        [record] = records(home)
        assert record["actual_micros"] == ANTHROPIC_MICROS

    def test_stream_closed_early_records_what_was_received(self, server, book, home):
        client = guard_anthropic.guard_client(anthropic_client(server), book)
        with client.messages.create(
            model="test-model", max_tokens=800, messages=MESSAGES, stream=True
        ) as stream:
            next(iter(stream))
        [record] = records(home)
        # message_start only: its input usage and 1 output token
        assert record["tokens"]["output"] == 1
        assert record["actual_micros"] == ANTHROPIC_MICROS - 699 * 15

    @pytest.mark.usefixtures("book")
    def test_halt_raises_and_sends_nothing(self, server, home, monkeypatch):
        monkeypatch.setenv("LEDGER_USD_DAILY_CAP", "0.001")
        client = guard_anthropic.guard_client(anthropic_client(server), ledger.open(home))
        with pytest.raises(ledger.BudgetHalted) as caught:
            client.messages.create(model="test-model", max_tokens=800, messages=MESSAGES)
        assert caught.value.verdict.verdict == "halt-100"
        assert server.requests == []
        assert records(home) == []

    def test_no_output_limit_is_refused_before_sending(self, server, book):
        client = guard_anthropic.guard_client(anthropic_client(server), book)
        with pytest.raises(ValueError, match="no output limit"):
            client.messages.create(model="test-model", messages=MESSAGES)
        assert server.requests == []

    def test_everything_else_is_the_original_client(self, server, book):
        original = anthropic_client(server)
        client = guard_anthropic.guard_client(original, book)
        assert client.base_url == original.base_url
        assert client.messages.count_tokens == original.messages.count_tokens

    def test_async_client(self, server, book, home):
        raw = anthropic.AsyncAnthropic(base_url=server.url, api_key="test", max_retries=0)
        client = guard_anthropic.guard_client(raw, book)

        async def main():
            await client.messages.create(model="test-model", max_tokens=800, messages=MESSAGES)
            stream = await client.messages.create(
                model="test-model", max_tokens=800, messages=MESSAGES, stream=True
            )
            async for _event in stream:
                pass
            await raw.close()

        asyncio.run(main())
        assert [r["actual_micros"] for r in records(home)] == [ANTHROPIC_MICROS] * 2


class TestOpenAI:
    def test_chat_completion(self, server, book, home):
        client = guard_openai.guard_client(openai_client(server), book)
        reply = client.chat.completions.create(
            model="test-gpt", max_completion_tokens=600, messages=MESSAGES
        )
        assert reply.choices[0].message.content == "hello"
        [record] = records(home)
        assert record["actual_micros"] == CHAT_MICROS
        assert record["tokens"]["reasoning"] == 200

    def test_chat_stream_with_usage(self, server, book, home):
        client = guard_openai.guard_client(openai_client(server), book)
        stream = client.chat.completions.create(
            model="test-gpt", max_tokens=600, messages=MESSAGES, stream=True,
            stream_options={"include_usage": True},
        )  # fmt: skip
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert text == "hello"
        [record] = records(home)
        assert record["actual_micros"] == CHAT_MICROS

    def test_chat_stream_without_usage_is_recorded_at_its_estimate(self, server, book, home):
        client = guard_openai.guard_client(openai_client(server), book)
        stream = client.chat.completions.create(
            model="test-gpt", max_tokens=600, messages=MESSAGES, stream=True
        )
        list(stream)
        verdict = events_of(home, "budget.allow")[0]["payload"]
        [record] = records(home)
        assert record["actual_micros"] == verdict["estimated_micros"]

    def test_responses(self, server, book, home):
        client = guard_openai.guard_client(openai_client(server), book)
        client.responses.create(model="test-gpt", max_output_tokens=900, input="héllo")
        [record] = records(home)
        assert record["actual_micros"] == RESPONSES_MICROS
        assert events_of(home, "budget.allow")[0]["payload"]["input_tokens"] == 2

    def test_responses_stream_is_recorded_from_response_completed(self, server, book, home):
        client = guard_openai.guard_client(openai_client(server), book)
        stream = client.responses.create(
            model="test-gpt", max_output_tokens=900, input="héllo", stream=True
        )
        assert records(home) == []  # nothing is recorded before the stream ends
        events = list(stream)
        assert [e.type for e in events] == [
            "response.created", "response.output_text.delta", "response.completed",
        ]  # fmt: skip
        assert events[0].response.usage is None  # only response.completed carries usage
        [record] = records(home)
        assert record["actual_micros"] == RESPONSES_MICROS
        assert record["tokens"]["cache_read"] == 1000
        assert record["tokens"]["reasoning"] == 600
        assert record["settled"] is True
        assert server.requests[-1][1]["stream"] is True

    def test_async_chat(self, server, book, home):
        raw = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        client = guard_openai.guard_client(raw, book)

        async def main():
            await client.chat.completions.create(
                model="test-gpt", max_tokens=600, messages=MESSAGES
            )
            await raw.close()

        asyncio.run(main())
        assert [r["actual_micros"] for r in records(home)] == [CHAT_MICROS]

    def test_no_output_limit_is_refused(self, server, book):
        client = guard_openai.guard_client(openai_client(server), book)
        with pytest.raises(ValueError, match="no output limit"):
            client.chat.completions.create(model="test-gpt", messages=MESSAGES)
        assert server.requests == []
