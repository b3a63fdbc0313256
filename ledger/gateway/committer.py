"""Decisions and records of many calls in flight, sealed with one fsync per batch.

The gateway answers many requests at once, each needing a verdict before it is
forwarded and a record after it. Every decision and record runs in one worker
thread, in batches, through the batch runner ``ledger serve`` uses
(``ledger.batching``): each job in its own transaction in arrival order, one
fsync at the end, and no job's result handed back before it. While a batch
runs, new jobs queue up, so batches grow with the load. The results of a batch
go back to the event loop in one hand-off, not one per job.

Derived state the batches keep in memory is written by the worker while no job
is waiting, a few index records at a time (``BatchRunner.write_while_idle``),
not whole after a batch: that write took several milliseconds every half
second, and the batch's callers waited for it.

When nothing is queued or running and its request is the only one being
answered, a job runs at once on the event loop's own thread, as a batch of
one: handing it to the worker and back would cost two thread wake-ups, about a
fifth of what the job itself costs. Two things send a job to the worker
instead. A job that would start the billing observer (a process that may take
seconds) stops before it does and goes to the worker. And after an inline
batch slower than ``INLINE_SLOW_SECONDS`` (a disk whose fsync stalls), jobs go
to the worker for ``INLINE_PAUSE_SECONDS``, so that a slow disk holds up
decisions, never every other request's bytes.
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
from ledger.edges.clock import monotonic
from ledger.edges.observer import ObserverDeferred, observers_deferred
from ledger.errors import ChainIOError
from ledger.runtime import Runtime

T = TypeVar("T")
Job = Callable[[Runtime], Any]
BATCH_LIMIT = 256
INLINE_SLOW_SECONDS = 0.02
INLINE_PAUSE_SECONDS = 1.0
GATHER_FROM_REQUESTS = 32
GATHER_SECONDS = 0.05
# Between batches, derived state kept in memory is written in steps of this many
# key index records (about a millisecond), this far apart while any is left;
# with nothing left, the worker looks again this often.
IDLE_WRITE_ROWS = 16
IDLE_STEP_SECONDS = 0.005
IDLE_CHECK_SECONDS = 0.05


@dataclass(slots=True)
class _Pending:
    job: Job
    loop: asyncio.AbstractEventLoop | None  # None: run inline, nothing to hand back
    future: "asyncio.Future[Any] | None"
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
        # One batch at a time, the worker's or one run inline.
        self._turn = threading.Lock()
        self._queued = 0  # jobs handed to the worker and not yet settled (event loop only)
        self._inline_paused_until = 0.0
        self._stopping = False
        # HTTP requests being answered, kept by the gateway's app (event loop only).
        self.requests = 0
        self.jobs = 0
        self.inline = 0

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
        """Run ``job`` in a batch (at once when nothing else is going on); its result once durable.

        Raises:
            LedgerError: whatever ``job`` raised.
        """
        alone = self.requests <= 1 and self._queued == 0
        if alone and monotonic() >= self._inline_paused_until:
            ran = self._run_inline(job)
            if ran is not None:
                result: T = _unwrap(ran)
                return result
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queued += 1
        try:
            self._queue.put(_Pending(job, loop, future))
            return await future
        finally:
            self._queued -= 1

    def _run_inline(self, job: Job) -> tuple[bool, Any] | None:
        """Run ``job`` as a batch of one on this thread; ``None`` if it belongs on the worker."""
        if not self._turn.acquire(blocking=False):
            return None
        pending = _Pending(job, None, None)
        began = monotonic()
        try:
            with observers_deferred():
                self._run_batch([pending], joining=False)
        finally:
            self._turn.release()
        if monotonic() - began > INLINE_SLOW_SECONDS:
            self._inline_paused_until = monotonic() + INLINE_PAUSE_SECONDS
        outcome = pending.outcome
        if outcome is not None and not outcome[0] and isinstance(outcome[1], ObserverDeferred):
            return None  # nothing was appended: the worker runs it, observer and all
        self.inline += 1
        return outcome if outcome is not None else (False, ChainIOError("the decision was not run"))

    def _work(self) -> None:
        self._runner.writes_while_idle = True
        while not self._stopping:
            first = self._next_job()
            if first is None:
                break
            batch = [first]
            self._gather(batch)
            with self._turn:
                self._run_batch(batch, joining=True)
            _hand_back(batch)
        with self._turn:
            self._runner.close()

    def _next_job(self) -> _Pending | None:
        """The next job (``None``: stop); until it comes, derived state is written in steps.

        Each step (``IDLE_WRITE_ROWS`` key index records, or the state file)
        runs under the turn an inline job takes, which then goes to this queue
        instead and waits for the step alone.
        """
        more = True
        while True:
            try:
                return self._queue.get(timeout=IDLE_STEP_SECONDS if more else IDLE_CHECK_SECONDS)
            except queue.Empty:
                pass
            if self._turn.acquire(blocking=False):
                try:
                    more = self._runner.write_while_idle(IDLE_WRITE_ROWS)
                finally:
                    self._turn.release()

    def _gather(self, batch: list[_Pending]) -> None:
        """Add the jobs queued behind ``batch[0]``, waiting for more under load.

        With ``GATHER_FROM_REQUESTS`` or more requests being answered, the
        batch waits up to ``GATHER_SECONDS`` for a quarter of them to queue a
        job (PostgreSQL's ``commit_delay``, for the same reason): where fsync is
        quicker than the event loop makes jobs, batches would otherwise stay at
        one job per fsync at any load. The wait costs no CPU, so the
        calls/s a busy gateway manages do not drop, and each fsync carries many
        decisions.
        """
        many = self.requests >= GATHER_FROM_REQUESTS
        wanted = max(1, self.requests // 4) if many else 1
        self._take(batch, wanted, monotonic() + GATHER_SECONDS)

    def _run_batch(self, batch: list[_Pending], *, joining: bool) -> None:
        """Run ``batch``; ``joining``: jobs queued meanwhile join it (the worker's batches)."""
        try:
            self._runner.run(
                functools.partial(self._run_each, batch, joining),
                functools.partial(_forget_undurable, batch),
                functools.partial(_mark_durable, batch),
            )
        except Exception as exc:  # noqa: BLE001 - a bug must not leave requests waiting
            self._log(f"internal error in a batch: {type(exc).__name__}: {exc}")
            for pending in batch:
                if pending.outcome is None:
                    pending.outcome = (False, ChainIOError(f"internal error: {exc}"))

    def _run_each(self, batch: list[_Pending], joining: bool, runtime: Runtime) -> None:
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
            if joining and index == len(batch):
                # Jobs that arrived meanwhile join the batch: on a fleet's store it
                # waited for the fleet-wide lock, and they would wait for it again.
                self._take(batch)

    def _take(self, batch: list[_Pending], wanted: int = 0, deadline: float = 0.0) -> None:
        """Add queued jobs to ``batch``; below ``wanted`` jobs, wait for more until ``deadline``.

        The stop marker ends the taking and the worker's loop.
        """
        while len(batch) < BATCH_LIMIT and not self._stopping:
            try:
                if len(batch) >= wanted:
                    item = self._queue.get_nowait()
                else:
                    item = self._queue.get(timeout=max(0.0, deadline - monotonic()))
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
        if pending.loop is not None:
            by_loop.setdefault(pending.loop, []).append(pending)
    for loop, settled in by_loop.items():
        loop.call_soon_threadsafe(_settle_all, settled)


def _settle_all(batch: list[_Pending]) -> None:
    for pending in batch:
        _settle(pending.future, pending.outcome)


def _unwrap(outcome: tuple[bool, Any]) -> Any:
    if outcome[0]:
        return outcome[1]
    raise outcome[1]


def _settle(future: "asyncio.Future[Any] | None", outcome: tuple[bool, Any] | None) -> None:
    if future is None or future.done():  # the request was cancelled meanwhile
        return
    if outcome is None:
        future.set_exception(ChainIOError("the decision was not run"))
    elif outcome[0]:
        future.set_result(outcome[1])
    else:
        future.set_exception(outcome[1])
