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


def _index_keys(home: Path) -> int:
    """Idempotency keys in the index file itself (what another process would read)."""
    import sqlite3

    with sqlite3.connect(home / "state" / "index.sqlite3") as db:
        return int(db.execute("SELECT count(*) FROM keys WHERE k != x''").fetchone()[0])


def test_a_runner_that_writes_while_idle_leaves_its_batches_unburdened(
    home: Path, monkeypatch: pytest.MonkeyPatch
):
    """The whole write no longer follows a batch; steps between batches write it, nothing lost."""
    from ledger.edges.files import keptstate

    monkeypatch.setattr(keptstate, "WRITE_EVERY_SECONDS", 0.0)  # due at every batch
    runner = BatchRunner(home, NOW, print)
    runner.run(lambda runtime: _record(runtime, "k:warm"), lambda: None)
    runner.writes_while_idle = True
    before = _index_keys(home)
    keys = [f"k:{number}" for number in range(40)]
    runner.run(lambda runtime: [_record(runtime, key) for key in keys], lambda: None)
    assert _index_keys(home) == before  # held, though due: the batch wrote nothing
    steps = 0
    while runner.write_while_idle(16):
        steps += 1
        assert steps < 20
    # 40 keys and 80 refs in steps of 16 rows, then the state file.
    assert steps >= 4
    assert _index_keys(home) == before + 40
    # In between, the keys still held were found as ever; a fresh process finds all.
    fresh = Runtime(home, NOW)
    assert all(_record(fresh, key) for key in keys)
    runner.close()


def test_keys_half_written_between_batches_are_found_once(home: Path):
    runner = BatchRunner(home, NOW, print)
    runner.writes_while_idle = True
    keys = [f"k:{number}" for number in range(20)]
    firsts = runner.run(lambda runtime: [_record(runtime, key) for key in keys], lambda: None)
    runner.write_while_idle(7)  # some rows in the index, the rest still held
    repeats = runner.run(lambda runtime: [_record(runtime, key) for key in keys], lambda: None)
    runner.close()
    assert firsts == [False] * 20
    assert repeats == [True] * 20
    assert all(_record(Runtime(home, NOW), key) for key in keys)


def test_a_runner_never_idle_still_writes_once_overdue(home: Path, monkeypatch: pytest.MonkeyPatch):
    from ledger import batching

    monkeypatch.setattr(batching, "OVERDUE_SECONDS", 0.0)
    runner = BatchRunner(home, NOW, print)
    runner.writes_while_idle = True
    before = _index_keys(home) if (home / "state" / "index.sqlite3").exists() else 0
    runner.run(lambda runtime: [_record(runtime, f"k:{n}") for n in range(5)], lambda: None)
    assert _index_keys(home) == before + 5
    runner.close()
