"""The key index while a long-lived process keeps derived state in memory (``ledger.batching``)."""

import os
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


@pytest.mark.parametrize("kept", [True, False], ids=["batch runner", "in-process"])
def test_a_gated_call_makes_two_durable_writes(
    home: Path, monkeypatch: pytest.MonkeyPatch, kept: bool
):
    """The verdict and the record, each fsync'd once; the key index and state never are."""
    runner = BatchRunner(home, NOW, print)

    def verdict(runtime: Runtime) -> str:
        document, _ = calls.verdict(runtime, "0.5", "openai", cycle_id="s-1")
        return str(document["verdict_ref"])

    def record(runtime: Runtime, ref: str, key: str) -> None:
        calls.record(runtime, "0.5", "openai", verdict_ref=ref, cycle_id="s-1",
                     idempotency_key_value=key, model="gpt-x")  # fmt: skip

    def call(key: str) -> None:
        if kept:
            ref = runner.run(verdict, lambda: None)
            runner.run(lambda runtime: record(runtime, ref, key), lambda: None)
        else:
            record(Runtime(home, NOW), verdict(Runtime(home, NOW)), key)

    call("anthropic:msg_warm")  # first use: key files, folders, the MAC key
    synced: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    for number in range(5):
        call(f"anthropic:msg_{number}")
    assert len(synced) == 2 * 5
    runner.close()
