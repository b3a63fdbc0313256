"""Batches of requests: one group commit each, and replies kept by request id (SPEC §9).

A batch is decided in one group commit by the batch runner the gateway shares
(``ledger.batching``): each request in its own transaction in arrival order,
one fsync at the end, and no reply before it. A request id answered before
gets the same reply again without running. If the group's fsync fails, the
replies noted for the batch are forgotten and each request is decided again
on its own, with its own fsync.
"""

import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from ledger.batching import BatchRunner
from ledger.runtime import Runtime
from ledger.server.protocol import STATUS_OK, Reply, Request

Execute = Callable[[Request], Reply]
ANSWERED_KEPT = 4096  # replies kept by request id, for a repeat of the same id


class Batches:
    """Runs the server's batches for one home."""

    def __init__(self, home: Path, execute: Execute, log: Callable[[str], None]) -> None:
        self.home = home
        self._execute = execute
        self._answered: OrderedDict[str, bytes] = OrderedDict()
        # The server's own environment: requests run in their clients' (see
        # ``cli.served``), which may still be in place between requests.
        self._runner = BatchRunner(home, dict(os.environ), log)

    def make_predecessor_durable(self) -> None:
        """Make durable what a killed server wrote before anything is decided on top of it."""
        self._runner.make_predecessor_durable()

    def run(self, requests: list[Request]) -> list[bytes]:
        """Decide ``requests`` in order in one group commit; their encoded replies."""

        def decide(_runtime: Runtime) -> list[bytes]:
            return self._run_each(requests)

        durable: set[str] = set()

        def forget() -> None:
            for request in requests:
                if request.request_id not in durable:
                    self._answered.pop(request.request_id, None)

        def made_durable() -> None:
            durable.update(r.request_id for r in requests if r.request_id in self._answered)

        return self._runner.run(decide, forget, made_durable)

    def close(self) -> None:
        """Write the state kept in memory (under the chain lock), before the server exits."""
        self._runner.close()

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
