"""Decisions and records of many calls in flight, sealed with one fsync per batch.

The gateway answers many requests at once, each needing a verdict before it is
forwarded and a record after it. One fsync each would cap it at the disk's
fsync rate, so every decision and record runs in one worker thread, in batches,
as ``ledger serve`` runs its requests (``ledger.edges.files.groupcommit``): one lock
hold per batch, each job in its own transaction in arrival order, one fsync at
the end, and no job's result handed back before it. While a batch runs, new
jobs queue up, so batches grow with the load.

If the batch's fsync fails, nothing of it was handed back and its entries are
gone again: derived state written meanwhile is dropped (it is rebuilt from the
chain) and each job runs again on its own, with its own fsync.
"""

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ledger.edges.files.chainfile import ChainFile
from ledger.edges.files.groupcommit import GroupCommitError, group_commit
from ledger.edges.files.keptstate import KeptStates, keeping
from ledger.edges.locks import exclusive_lock
from ledger.errors import ChainIOError, LedgerError
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


class Committer:
    """The worker thread that runs the gateway's decisions and records in group commits."""

    def __init__(self, home: Path, environ: dict[str, str], log: Callable[[str], None]) -> None:
        self.home = home
        self._environ = environ
        self._log = log
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._kept = KeptStates()
        self._thread = threading.Thread(target=self._work, name="ledger-proxy-commit")
        self.batches = 0
        self.jobs = 0

    @property
    def environ(self) -> dict[str, str]:
        """The gateway's environment (its provider keys among it)."""
        return self._environ

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

    def _runtime(self) -> Runtime:
        # A fresh runtime per batch: a changed ledger.toml, trust store or key
        # is in effect for the next batch, as it is for the next command.
        return Runtime(self.home, self._environ)

    def _work(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < BATCH_LIMIT:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            try:
                self._run_batch(batch)
            except Exception as exc:  # noqa: BLE001 - a bug must not leave requests waiting
                self._log(f"internal error in a batch: {type(exc).__name__}: {exc}")
                for pending in batch:
                    if pending.outcome is None:
                        pending.outcome = (False, ChainIOError(f"internal error: {exc}"))
                self._hand_back(batch)
        self._write_state_at_stop()

    def _run_batch(self, batch: list[_Pending]) -> None:
        runtime = self._runtime()
        try:
            chain = runtime.chain
        except LedgerError:
            chain = None  # no usable configuration: each job finds that out itself
        if not isinstance(chain, ChainFile):
            # A fleet's database commits each transaction itself.
            self._run_each(batch, runtime)
            self.batches += 1
            self._hand_back(batch)
            return
        try:
            with group_commit(chain) as group, keeping(self._kept):
                group.after_commit.append(self._write_state_when_due)
                self._run_each(batch, runtime)
        except GroupCommitError as exc:
            self._log(f"group commit failed, running the batch again one by one: {exc}")
            self._kept.forget()
            with contextlib.suppress(LedgerError):
                runtime.states.delete()
            self._run_each(batch, self._runtime())
        except ChainIOError:
            # The group could not start (the chain or its lock is unusable):
            # each job meets that as it would on its own.
            self._run_each(batch, self._runtime())
        self.batches += 1
        self._hand_back(batch)

    def _run_each(self, batch: list[_Pending], runtime: Runtime) -> None:
        for pending in batch:
            try:
                pending.outcome = (True, pending.job(runtime))
                self.jobs += 1
            except Exception as exc:  # noqa: BLE001 - handed to the awaiting request
                pending.outcome = (False, exc)

    @staticmethod
    def _hand_back(batch: list[_Pending]) -> None:
        for pending in batch:
            pending.loop.call_soon_threadsafe(_settle, pending.future, pending.outcome)

    def _write_state_when_due(self) -> None:
        if self._kept.due():
            self._kept.write_or_log(self._log)

    def _write_state_at_stop(self) -> None:
        try:
            chain = self._runtime().chain
            if isinstance(chain, ChainFile):
                with exclusive_lock(chain.lock_path, chain.lock_timeout):
                    self._kept.write_or_log(self._log)
        except LedgerError as exc:
            self._log(f"could not write derived state at stop: {exc}")


def _settle(future: "asyncio.Future[Any]", outcome: tuple[bool, Any] | None) -> None:
    if future.done():  # the request was cancelled meanwhile
        return
    if outcome is None:
        future.set_exception(ChainIOError("the decision was not run"))
    elif outcome[0]:
        future.set_result(outcome[1])
    else:
        future.set_exception(outcome[1])
