"""The gateway's committer: batches through the shared runner, one hand-off per batch."""

import asyncio
import threading
from pathlib import Path
from typing import Any

from ledger.gateway.committer import Committer
from ledger.runtime import Runtime
from ledger.services.gate import calls

NOW = {"LEDGER_NOW": "2026-06-01T12:00:00Z"}


def test_a_batch_is_handed_back_to_the_event_loop_in_one_wake_up(home: Path):
    """Six jobs in two batches: two wake-ups of the loop, every result right."""
    committer = Committer(home, NOW, lambda _line: None)
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
    assert committer.batches == 2
    assert wake_ups == 2
