"""The SDK guards price audio, images and service tiers as genai-prices lists them.

The official OpenAI SDK, guarded, talks to the fake provider, which reports
the usage a real one would (``x-test-usage``). Each record must be the
library's own price for that usage, each estimate price the most output at
the dearest rate the request may reach; a count of an unknown kind is
recorded at the estimate, with a warning on the ``ledger`` logger.
"""

import json
import logging
import math
from typing import Any

import openai
import pytest
from genai_prices import Usage

import ledger
from ledger.integrations import openai as guard_openai
from tests.fakes.provider import FakeProvider
from tests.gate_helpers import events_of
from tests.helpers.library_prices import PRICES_NOW, library_micros, library_rate


@pytest.fixture
def server():
    running = FakeProvider()
    yield running
    for client in running.clients:
        client.close()
    running.close()


@pytest.fixture
def book(home, monkeypatch, run_inproc):
    synced = run_inproc(["--home", str(home), "prices", "sync"], env={"LEDGER_NOW": PRICES_NOW})
    assert synced.code == 0, synced.stderr
    monkeypatch.setenv("LEDGER_NOW", PRICES_NOW)
    monkeypatch.setenv("LEDGER_BILLING_STALE_HALT_PCT", "100")
    return ledger.open(home)


def _client(server: FakeProvider, book: Any, usage: dict[str, Any]) -> Any:
    raw = openai.OpenAI(
        base_url=server.url + "/v1", api_key="test", max_retries=0,
        default_headers={"x-test-usage": json.dumps(usage)},
    )  # fmt: skip
    server.clients.append(raw)
    return guard_openai.guard_client(raw, book)


def _only(home: Any, event: str) -> dict[str, Any]:
    (found,) = [entry["payload"] for entry in events_of(home, event)]
    payload: dict[str, Any] = found
    return payload


def test_audio_in_and_out_are_priced_at_their_own_rates(server, book, home):
    usage = {"prompt_tokens": 1200, "completion_tokens": 900, "total_tokens": 2100,
             "prompt_tokens_details": {"audio_tokens": 1000},
             "completion_tokens_details": {"audio_tokens": 800}}  # fmt: skip
    client = _client(server, book, usage)
    client.chat.completions.create(
        model="gpt-audio", max_completion_tokens=2000, modalities=["text", "audio"],
        audio={"voice": "alloy", "format": "wav"},
        messages=[{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]}],
    )  # fmt: skip
    record = _only(home, "budget.record_call")
    assert record["actual_micros"] == library_micros("openai", "gpt-audio", Usage(
        input_tokens=1200, input_audio_tokens=1000, output_tokens=900, output_audio_tokens=800))  # fmt: skip
    verdict = _only(home, "budget.allow")
    exact = verdict["input_tokens"] * library_rate("openai", "gpt-audio", "input_audio_mtok")
    exact += 2000 * library_rate("openai", "gpt-audio", "output_audio_mtok")
    assert verdict["estimated_micros"] == math.ceil(exact)


def test_priority_is_priced_at_its_own_rates(server, book, home):
    usage = {"input_tokens": 2000, "output_tokens": 10_000, "total_tokens": 12_000}
    client = _client(server, book, usage)
    client.responses.create(model="gpt-5", input="hi", max_output_tokens=12_000,
                            service_tier="priority")  # fmt: skip
    record = _only(home, "budget.record_call")
    assert record["actual_micros"] == library_micros(
        "openai", "gpt-5", Usage(input_tokens=2000, output_tokens=10_000), "priority"
    )
    verdict = _only(home, "budget.allow")
    exact = verdict["input_tokens"] * library_rate("openai", "gpt-5", "input_mtok", "priority")
    exact += 12_000 * library_rate("openai", "gpt-5", "output_mtok", "priority")
    assert verdict["estimated_micros"] == math.ceil(exact)


def test_an_unknown_usage_count_records_the_estimate_and_warns(server, book, home, caplog):
    usage = {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150,
             "completion_tokens_details": {"hologram_tokens": 40}}  # fmt: skip
    client = _client(server, book, usage)
    with caplog.at_level(logging.WARNING, logger="ledger"):
        client.chat.completions.create(
            model="gpt-5", max_completion_tokens=4000,
            messages=[{"role": "user", "content": "hi"}],
        )  # fmt: skip
    record = _only(home, "budget.record_call")
    verdict = _only(home, "budget.allow")
    assert record["actual_micros"] == verdict["estimated_micros"]
    assert record["unknown_usage"] == ["completion_tokens_details.hologram_tokens"]
    assert "hologram_tokens" in caplog.text
