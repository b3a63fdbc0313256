"""Keeps the rollups current beside a long-lived writer (the gateway, ``ledger serve``, the daemon).

The rollups are folded with every record (SPEC §19), but never on the call
path: a batch's caller is answered once its entries are durable in the
chain, and only then is this follower nudged. Its own thread waits a moment
(so one fold covers many batches), then catches the rollups up from their
saved position (``rollups.catch_up``: the new entries verified, folded, the
position saved in SQLite without an fsync). A reader still catches up what
is left (a one-shot ``ledger record`` folds nothing), so a report is never
short of a record; it just rarely has anything left to fold.
"""

import threading
from collections.abc import Callable

from ledger.errors import LedgerError
from ledger.services.views.rollup_ports import RollupDeps
from ledger.services.views.rollups import catch_up

# One fold per this many seconds at most, whatever the rate of batches.
SETTLE_SECONDS = 0.5


class RollupFollower:
    """A thread that catches the rollups up soon after each ``nudge``."""

    def __init__(
        self,
        deps: Callable[[], RollupDeps],
        log: Callable[[str], None],
        settle_seconds: float = SETTLE_SECONDS,
    ) -> None:
        self._deps = deps
        self._log = log
        self._settle = settle_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._last_error: str | None = None
        self.folds = 0

    def nudge(self) -> None:
        """New entries are durable: fold them soon (starts the thread on first use)."""
        with self._start_lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="ledger-rollups", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.wait(self._settle):
                return
            self._wake.clear()
            self.fold_once()

    def fold_once(self) -> None:
        """Catch the rollups up now; a failure is logged once, never raised."""
        try:
            catch_up(self._deps())
        except (LedgerError, OSError) as exc:
            text = f"rollups: not caught up: {exc}"
            if text != self._last_error:
                self._log(text)
            self._last_error = text
            return
        self._last_error = None
        self.folds += 1

    def close(self) -> None:
        """Stop the thread (what is left is folded by the next reader)."""
        self._stop.set()
        self._wake.set()
        with self._start_lock:
            thread = self._thread
        if thread is not None:
            thread.join()
