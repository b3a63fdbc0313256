"""The gateway's committer: batches through the shared runner, one hand-off per batch."""

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ledger.gateway import committer as committer_module
from ledger.gateway.committer import Committer
from ledger.runtime import Runtime
from ledger.services.gate import calls
from tests.gate_helpers import chain_entries, use_observer

NOW = {"LEDGER_NOW": "2026-06-01T12:00:00Z"}


def test_a_batch_is_handed_back_to_the_event_loop_in_one_wake_up(home: Path):
    """Six jobs, five queued while the first runs: they join its batch, one wake-up of the loop."""
    committer = Committer(home, NOW, lambda _line: None)
    committer.requests = 6  # several requests being answered: every job goes to the worker
    held = threading.Event()
    started = threading.Event()

    def first(runtime: Runtime) -> str:
        started.set()
        held.wait(timeout=60)
        return str(calls.verdict(runtime, "1")[0]["verdict"])

    def verdict(runtime: Runtime) -> str:
        return str(calls.verdict(runtime, "1")[0]["verdict"])

    async def scenario() -> tuple[list[Any], int]:
        loop = asyncio.get_running_loop()
        wake_ups = 0
        real = loop.call_soon_threadsafe

        def counting(*args: Any, **kwargs: Any) -> Any:
            nonlocal wake_ups
            wake_ups += 1
            return real(*args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign,assignment]
        head = asyncio.ensure_future(committer.run(first))
        await asyncio.sleep(0)  # queued
        assert started.wait(60)  # the worker runs the first batch; the loop waits here
        rest = [asyncio.ensure_future(committer.run(verdict)) for _ in range(5)]
        await asyncio.sleep(0)  # each is queued behind the held batch
        held.set()
        results = await asyncio.gather(head, *rest)
        return results, wake_ups

    committer.start()
    try:
        results, wake_ups = asyncio.run(scenario())
    finally:
        committer.stop()
    assert results == ["allow"] * 6
    assert committer.jobs == 6
    assert committer.batches == 1
    assert wake_ups == 1


def _threads_of(committer: Committer, jobs: int, job: Any = None) -> list[str]:
    """Run ``jobs`` verdicts one after another; the name of the thread each ran on."""
    seen: list[str] = []

    def verdict(runtime: Runtime) -> str:
        seen.append(threading.current_thread().name)
        return str(calls.verdict(runtime, "1")[0]["verdict"])

    async def scenario() -> list[Any]:
        return [await committer.run(job or verdict) for _ in range(jobs)]

    committer.start()
    try:
        results = asyncio.run(scenario())
    finally:
        committer.stop()
    assert results == ["allow"] * jobs
    return seen


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """No inline batch counts as slow (a loaded test machine's first fsyncs can be)."""
    monkeypatch.setattr(committer_module, "INLINE_SLOW_SECONDS", 3600.0)


@pytest.mark.usefixtures("patient")
def test_a_job_whose_request_is_the_only_one_runs_on_the_event_loop_thread(home: Path):
    """No thread hand-off when nothing is queued: each job is a batch of one, sealed as ever."""
    committer = Committer(home, NOW, lambda _line: None)
    committer.requests = 1
    seen = _threads_of(committer, 3)
    assert seen == [threading.current_thread().name] * 3
    assert (committer.inline, committer.jobs, committer.batches) == (3, 3, 3)
    assert [entry["event_type"] for entry in chain_entries(home)[-3:]] == ["budget.allow"] * 3


def test_a_job_beside_other_requests_goes_to_the_worker(home: Path):
    """Another request being answered: the event loop is never held up by a decision."""
    committer = Committer(home, NOW, lambda _line: None)
    committer.requests = 2
    seen = _threads_of(committer, 2)
    assert seen == ["ledger-proxy-commit"] * 2
    assert committer.inline == 0


def test_after_a_slow_inline_batch_jobs_go_to_the_worker(
    home: Path, monkeypatch: pytest.MonkeyPatch
):
    """A disk whose fsync stalls holds up decisions only, not every request's bytes."""
    monkeypatch.setattr(committer_module, "INLINE_SLOW_SECONDS", 0.0)
    committer = Committer(home, NOW, lambda _line: None)
    committer.requests = 1
    seen = _threads_of(committer, 3)
    assert seen == [threading.current_thread().name] + ["ledger-proxy-commit"] * 2


OBSERVER = """
import json
print(json.dumps({"_unreachable": True, "_reason": "a test observer"}))
"""


@pytest.mark.usefixtures("patient")
def test_a_job_that_would_start_the_observer_is_run_by_the_worker(home: Path, tmp_path: Path):
    """The observer (a process) never runs on the event loop: the worker runs the job, once."""
    script = tmp_path / "observer.py"
    script.write_text(OBSERVER)
    use_observer(home, [sys.executable, str(script)])
    # Above 0 % of the cap a verdict wants a reading: the first does not, the second does.
    committer = Committer(home, {**NOW, "LEDGER_BILLING_STALE_HALT_PCT": "0"}, lambda _: None)
    committer.requests = 1
    seen: list[str] = []

    def verdict(runtime: Runtime) -> str:
        seen.append(threading.current_thread().name)
        return str(calls.verdict(runtime, "1")[0]["verdict"])

    async def scenario() -> list[str]:
        return [await committer.run(verdict) for _ in range(2)]

    committer.start()
    try:
        verdicts = asyncio.run(scenario())
    finally:
        committer.stop()
    here = threading.current_thread().name
    # The second was tried here first, stopped before the observer started, and run by the worker.
    assert seen == [here, here, "ledger-proxy-commit"]
    assert committer.inline == 1
    events = [entry["event_type"] for entry in chain_entries(home)]
    assert events[-3:] == [
        "budget.allow",
        "budget.observation",
        "budget." + verdicts[1].replace("-", "_"),
    ]


def test_under_load_a_batch_waits_for_more_jobs_before_its_fsync(
    home: Path, monkeypatch: pytest.MonkeyPatch
):
    """Many requests being answered: the first job waits for others, so one fsync seals many."""
    monkeypatch.setattr(committer_module, "GATHER_FROM_REQUESTS", 8)
    monkeypatch.setattr(committer_module, "GATHER_SECONDS", 60.0)  # the jobs end the wait
    committer = Committer(home, NOW, lambda _line: None)
    committer.requests = 8  # a quarter of them: two jobs make a batch

    def verdict(runtime: Runtime) -> str:
        return str(calls.verdict(runtime, "1")[0]["verdict"])

    async def scenario() -> list[str]:
        first = asyncio.ensure_future(committer.run(verdict))
        await asyncio.sleep(0.3)  # long enough for the worker to run a batch of one
        assert not first.done()  # it waits for company instead
        return list(await asyncio.gather(first, committer.run(verdict)))

    committer.start()
    try:
        results = asyncio.run(scenario())
    finally:
        committer.stop()
    assert results == ["allow", "allow"]
    assert (committer.jobs, committer.batches) == (2, 1)
