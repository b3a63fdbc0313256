"""The key index while a long-lived process keeps derived state in memory (``ledger.batching``)."""

from pathlib import Path

import pytest

from ledger.batching import BatchRunner
from ledger.runtime import Runtime
from ledger.services.chain import idempotency
from ledger.services.gate import calls

NOW = {"LEDGER_NOW": "2026-06-01T12:00:00Z"}


def _record(runtime: Runtime, key: str) -> bool:
    document, _warning = calls.record(
        runtime, "0.5", "openai", idempotency_key_value=key, model="gpt-x"
    )
    return bool(document["duplicate"])


def test_keys_held_in_memory_are_found_without_reading_the_chain(
    home: Path, monkeypatch: pytest.MonkeyPatch
):
    """Appends not written yet are counted in the recorded sizes: that is not damage."""

    def no_chain_scan(*_args: object) -> None:
        raise AssertionError("the key index was taken for damaged")

    monkeypatch.setattr(idempotency, "_chain_record", no_chain_scan)
    runner = BatchRunner(home, NOW, print)
    keys = [f"k:{number}" for number in range(30)]
    firsts = runner.run(lambda runtime: [_record(runtime, key) for key in keys], lambda: None)
    repeats = runner.run(lambda runtime: [_record(runtime, key) for key in keys], lambda: None)
    runner.close()
    assert firsts == [False] * 30
    assert repeats == [True] * 30
    # Written at the end: a fresh process finds every key in the index too.
    fresh = Runtime(home, NOW)
    assert all(_record(fresh, key) for key in keys)
