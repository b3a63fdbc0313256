"""Decisions and records of many calls in flight, sealed with one fsync per batch.

The gateway answers many requests at once, each needing a verdict before it is
forwarded and a record after it. Every decision and record runs in one worker
thread, in batches, through the batch runner ``ledger serve`` uses
(``ledger.batching``): each job in its own transaction in arrival order, one
fsync at the end, and no job's result handed back before it. While a batch
runs, new jobs queue up, so batches grow with the load. The results of a batch
go back to the event loop in one hand-off, not one per job.
"""

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ledger.batching import BatchRunner
from ledger.errors import ChainIOError
from ledger.runtime import Runtime

T = TypeVar("T")
Job = Callable[[Runtime], Any]
BATCH_LIMIT = 256


@dataclass(slots=True)
class _Pending:
    job: Job
    loop: asyncio.AbstractEventLoop
    future: "asyncio.Future[Any]"
    outcome: tuple[bool, Any] | None = None  # (succeeded, value or exception)
    durable: bool = False  # its outcome is final: never run again


class Committer:
    """The worker thread that runs the gateway's decisions and records in group commits."""

    def __init__(self, home: Path, environ: dict[str, str], log: Callable[[str], None]) -> None:
        self.home = home
        self._log = log
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._runner = BatchRunner(home, environ, log)
        self._thread = threading.Thread(target=self._work, name="ledger-proxy-commit")
        self._stopping = False
        self.jobs = 0

    @property
    def environ(self) -> dict[str, str]:
        """The gateway's environment (its provider keys among it)."""
        return self._runner.environ

    @property
    def batches(self) -> int:
        """Batches run so far."""
        return self._runner.batches

    def start(self) -> None:
        """Start the worker thread."""
        self._thread.start()

    def stop(self) -> None:
        """Finish every job already submitted, write the state kept in memory, and stop."""
        self._queue.put(None)
        self._thread.join()

    async def run(self, job: Callable[[Runtime], T]) -> T:
        """Run ``job`` with a fresh runtime in the next batch; its result once it is durable.

        Raises:
            LedgerError: whatever ``job`` raised.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put(_Pending(job, loop, future))
        return await future

    def _work(self) -> None:
        while not self._stopping:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            self._take_arrived(batch)
            try:
                self._runner.run(
                    functools.partial(self._run_each, batch),
                    functools.partial(_forget_undurable, batch),
                    functools.partial(_mark_durable, batch),
                )
            except Exception as exc:  # noqa: BLE001 - a bug must not leave requests waiting
                self._log(f"internal error in a batch: {type(exc).__name__}: {exc}")
                for pending in batch:
                    if pending.outcome is None:
                        pending.outcome = (False, ChainIOError(f"internal error: {exc}"))
            _hand_back(batch)
        self._runner.close()

    def _run_each(self, batch: list[_Pending], runtime: Runtime) -> None:
        index = 0
        while index < len(batch):
            pending = batch[index]
            index += 1
            if not pending.durable:
                try:
                    pending.outcome = (True, pending.job(runtime))
                    self.jobs += 1
                except Exception as exc:  # noqa: BLE001 - handed to the awaiting request
                    pending.outcome = (False, exc)
            if index == len(batch):
                # Jobs that arrived meanwhile join the batch: on a fleet's store it
                # waited for the fleet-wide lock, and they would wait for it again.
                self._take_arrived(batch)

    def _take_arrived(self, batch: list[_Pending]) -> None:
        while len(batch) < BATCH_LIMIT and not self._stopping:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is None:
                self._stopping = True
                return
            batch.append(item)


def _mark_durable(batch: list[_Pending]) -> None:
    """Every job that has run so far is durable: a later failure must not run it again."""
    for pending in batch:
        if pending.outcome is not None:
            pending.durable = True


def _forget_undurable(batch: list[_Pending]) -> None:
    """The batch's commit failed: its jobs not yet durable run again, each on its own."""
    for pending in batch:
        if not pending.durable:
            pending.outcome = None


def _hand_back(batch: list[_Pending]) -> None:
    """Settle a batch's futures: one wake-up of each event loop, not one per job."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Pending]] = {}
    for pending in batch:
        by_loop.setdefault(pending.loop, []).append(pending)
    for loop, settled in by_loop.items():
        loop.call_soon_threadsafe(_settle_all, settled)


def _settle_all(batch: list[_Pending]) -> None:
    for pending in batch:
        _settle(pending.future, pending.outcome)


def _settle(future: "asyncio.Future[Any]", outcome: tuple[bool, Any] | None) -> None:
    if future.done():  # the request was cancelled meanwhile
        return
    if outcome is None:
        future.set_exception(ChainIOError("the decision was not run"))
    elif outcome[0]:
        future.set_result(outcome[1])
    else:
        future.set_exception(outcome[1])
