"""Records keyed by a response id: a reused id counts, one response seen by two paths counts once.

The gateway and the SDK guards seal a response under ``<provider>:<id>``
(``recorded_by`` names which of them). Every record settles its own
verdict's reservation at once, whichever of those it is.
"""

from typing import Any

import pytest

import ledger

NOW = "2026-03-02T10:00:00Z"
USAGE = {"prompt_tokens": 1000, "completion_tokens": 100}
KEY = "openai:chatcmpl-7"


@pytest.fixture
def book(home, monkeypatch) -> Any:
    with (home / "ledger.toml").open("a") as config:
        config.write('\n[prices."openai/gpt-test"]\ninput_per_mtok = 2\noutput_per_mtok = 8\n')
    monkeypatch.setenv("LEDGER_NOW", NOW)
    monkeypatch.setenv("LEDGER_BILLING_STALE_HALT_PCT", "100")
    return ledger.open(home)


def _admit(book: Any) -> str:
    verdict = book.verdict(0.5, provider="openai")
    assert verdict.allowed
    ref: str = verdict.verdict_ref
    return ref


def _record(book: Any, ref: str, path: str) -> Any:
    return book.record(
        provider="openai", model="gpt-test", verdict_ref=ref, idempotency_key=KEY, usage=USAGE,
        same_record_only=False, recorded_by=path,
    )  # fmt: skip


def test_one_response_recorded_by_the_gateway_and_a_guard_counts_once_and_settles_both(book):
    gateway_ref, guard_ref = _admit(book), _admit(book)
    first = _record(book, gateway_ref, "gateway")
    second = _record(book, guard_ref, "sdk")
    assert first.actual_micros == 1000 * 2 + 100 * 8
    assert second.actual_micros == 0  # counted by the gateway's record
    assert second.settled is True
    assert second.idempotency_key == f"{KEY}:{guard_ref[:16]}"
    figures = book.usage()
    assert figures.usd_reserved_micros == 0  # neither verdict holds budget until its TTL
    assert figures.usd_used_micros == first.actual_micros
    again = _record(book, guard_ref, "sdk")
    assert again.duplicate is True
    assert book.usage().usd_used_micros == first.actual_micros


def test_an_id_the_same_path_reused_for_another_call_counts_again(book):
    refs = [_admit(book) for _ in range(3)]
    sealed = [_record(book, ref, "sdk") for ref in refs]
    assert [record.duplicate for record in sealed] == [False] * 3
    assert book.usage().usd_used_micros == 3 * (1000 * 2 + 100 * 8)
    assert book.usage().usd_reserved_micros == 0
    assert _record(book, refs[1], "sdk").duplicate is True
