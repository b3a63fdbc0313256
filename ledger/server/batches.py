"""Batches of requests: one group commit each, and replies kept by request id (SPEC §9).

A batch is decided inside one group commit on the home's chain (see
``ledger.edges.files.groupcommit``): one lock hold, each request in its own
transaction in arrival order, one fsync at the end, and no reply before it. A
request id answered before gets the same reply again without running. If the
group's fsync fails, nothing of the batch was acknowledged and its entries are
gone again: derived state written meanwhile is dropped (it is rebuilt from the
chain) and each request is decided again on its own, with its own fsync.

Derived state stays in memory between batches (``ledger.edges.files.keptstate``) and
is written after a batch's fsync at most every half second, and at the end.
"""

import contextlib
import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from ledger.edges.files.chainfile import ChainFile
from ledger.edges.files.groupcommit import GroupCommitError, group_commit, sync_chain
from ledger.edges.files.keptstate import KeptStates, keeping
from ledger.edges.locks import exclusive_lock
from ledger.errors import ChainIOError, LedgerError
from ledger.runtime import Runtime
from ledger.server.protocol import STATUS_OK, Reply, Request

Execute = Callable[[Request], Reply]
ANSWERED_KEPT = 4096  # replies kept by request id, for a repeat of the same id


class Batches:
    """Runs the server's batches for one home."""

    def __init__(self, home: Path, execute: Execute, log: Callable[[str], None]) -> None:
        self.home = home
        self._execute = execute
        self._log = log
        self._answered: OrderedDict[str, bytes] = OrderedDict()
        self._chain_for: tuple[tuple[int, ...] | None, object] | None = None
        # The server's own environment: requests run in their clients' (see
        # ``cli.served``), which may still be in place between requests.
        self._environ = dict(os.environ)
        self._kept = KeptStates()

    def _runtime(self) -> Runtime:
        return Runtime(self.home, self._environ)

    def make_predecessor_durable(self) -> None:
        """Make durable what a killed server wrote before anything is decided on top of it."""
        try:
            chain = self._runtime().chain
            if isinstance(chain, ChainFile):
                sync_chain(chain)
        except LedgerError as exc:
            self._log(f"could not fsync the chain at start: {exc}")

    def _batch_chain(self) -> "ChainFile | object":
        """The chain a batch groups on, as the home's configuration says now.

        Only the store and the lock timeout are taken from it, so it is parsed
        again only when ``ledger.toml`` changes (its inode, size or mtime);
        each request still reads the configuration itself.

        Raises:
            LedgerError: the configuration is unusable.
        """
        config_path = self._runtime().config_path
        try:
            found = config_path.stat()
            identity: tuple[int, ...] | None = (found.st_ino, found.st_size, found.st_mtime_ns)
        except OSError:
            identity = None
        if identity is None or self._chain_for is None or self._chain_for[0] != identity:
            self._chain_for = (identity, self._runtime().chain)
        return self._chain_for[1]

    def run(self, requests: list[Request]) -> list[bytes]:
        """Decide ``requests`` in order in one group commit; their encoded replies."""
        try:
            chain = self._batch_chain()
        except LedgerError:
            # No usable configuration here: each request finds that out itself.
            return self._run_each(requests)
        if not isinstance(chain, ChainFile):
            # A fleet's database commits each transaction itself (SPEC §8).
            return self._run_each(requests)
        try:
            with group_commit(chain) as group, keeping(self._kept):
                group.after_commit.append(self._write_state_when_due)
                return self._run_each(requests)
        except GroupCommitError as exc:
            # Nothing of the batch was acknowledged and its entries are gone
            # again; derived state written meanwhile may be ahead of the chain.
            self._log(f"group commit failed, deciding the batch again one by one: {exc}")
            self._kept.forget()
            with contextlib.suppress(LedgerError):
                self._runtime().states.delete()
            for request in requests:
                self._answered.pop(request.request_id, None)
            return self._run_each(requests)
        except ChainIOError:
            # The group could not start (the chain or its lock is unusable):
            # each request meets that as it would in its own process.
            return self._run_each(requests)

    def _write_state_when_due(self) -> None:
        if self._kept.due():
            self._kept.write_or_log(self._log)

    def close(self) -> None:
        """Write the state kept in memory (under the chain lock), before the server exits."""
        try:
            chain = self._batch_chain()
            if isinstance(chain, ChainFile):
                with exclusive_lock(chain.lock_path, chain.lock_timeout):
                    self._kept.write_or_log(self._log)
        except LedgerError as exc:
            self._log(f"could not write derived state at stop: {exc}")

    def _run_each(self, requests: list[Request]) -> list[bytes]:
        replies: list[bytes] = []
        for request in requests:
            known = self._answered.get(request.request_id)
            if known is None:
                reply = self._execute(request)
                known = reply.encode()
                if reply.status == STATUS_OK:
                    self._remember(request.request_id, known)
            replies.append(known)
        return replies

    def _remember(self, request_id: str, data: bytes) -> None:
        self._answered[request_id] = data
        while len(self._answered) > ANSWERED_KEPT:
            self._answered.popitem(last=False)
