"""A server that reuses response ids (Ollama's ``chatcmpl-<n>``): each call still counts once.

The fake answers every call with the same id (``x-test-response-id``); the
gateway records each under a key that also names its verdict, settles each
reservation at once, and a retry of one record is still a duplicate.
"""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import ledger
from tests.gateway.helpers import NOW, Proxy, Upstream, records, start_proxy, verdicts, write_config

pytestmark = pytest.mark.timeout(120)
HEADERS = {"authorization": "Bearer sk-ollama-test", "x-test-response-id": "7"}
CALL_MICROS = 2000 * 1 + 500 * 2  # the fake's usage at $1 / $2


@pytest.fixture
def proxy(home: Path, upstream: Upstream) -> Iterator[Proxy]:
    extra = (
        f'[proxy.providers.ollama]\nurl = "{upstream.url}"\n\n'
        '[prices."ollama/llama-test"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n'
    )
    write_config(home, upstream.url, cap_usd="1", extra=extra)
    running = start_proxy(home, "--listen", "127.0.0.1:0")
    yield running
    assert running.stop() == 0, running.lines


def _book(home: Path, monkeypatch: pytest.MonkeyPatch) -> ledger.Ledger:
    monkeypatch.setenv("LEDGER_NOW", NOW)  # the day the gateway recorded on
    return ledger.open(home=home)


def _call(proxy: Proxy, text: str) -> None:
    body = {"model": "llama-test", "max_tokens": 100_000,
            "messages": [{"role": "user", "content": text}]}  # fmt: skip
    response = httpx.post(
        f"{proxy.url}/ollama/v1/chat/completions", json=body, headers=HEADERS, timeout=60
    )
    assert response.status_code == 200, response.text
    assert response.json()["id"] == "chatcmpl-7"


def test_six_calls_answered_with_one_id_are_six_records_each_settled(proxy, home, monkeypatch):
    for number in range(6):
        _call(proxy, f"question {number}")
    sealed = records(home)
    assert len(sealed) == 6
    assert [record["actual_micros"] for record in sealed] == [CALL_MICROS] * 6
    assert all(record["settled"] for record in sealed)
    refs = [record["verdict_ref"] for record in sealed]
    assert len(set(refs)) == len(verdicts(home)) == 6  # each call its own verdict
    keys = [record["idempotency_key"] for record in sealed]
    assert keys[0] == "ollama:chatcmpl-7"
    assert keys[1:] == [f"ollama:chatcmpl-7:{ref[:16]}" for ref in refs[1:]]
    book = _book(home, monkeypatch)
    figures = book.usage()
    assert figures.usd_reserved == 0  # no reservation waits for its TTL
    assert figures.usd_used == pytest.approx(6 * CALL_MICROS / 1e6)


def test_a_retry_of_one_of_those_records_is_still_a_duplicate(proxy, home, monkeypatch):
    for number in range(3):
        _call(proxy, f"question {number}")
    third = records(home)[2]
    book = _book(home, monkeypatch)
    again = book.record(
        provider="ollama", model="llama-test", verdict_ref=third["verdict_ref"],
        idempotency_key="ollama:chatcmpl-7", same_record_only=False, recorded_by="gateway",
        usage={"prompt_tokens": 2000, "completion_tokens": 500},
    )  # fmt: skip
    assert again.duplicate is True
    assert again.idempotency_key == third["idempotency_key"]
    assert len(records(home)) == 3
