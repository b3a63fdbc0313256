"""A full verification started from the Integrity page, run in the background.

It is ``verify-chain``'s check (a BROKEN result is kept as a finding the gate
halts on, as ``verify-chain`` keeps it); one runs at a time.
"""

import threading
import time
from collections.abc import Callable
from typing import Any

from ledger.core.timefmt import format_ts
from ledger.errors import LedgerError


class Verifier:
    """The running verification (if any) and the last results."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, Any] | None = None
        self.results: list[dict[str, Any]] = []

    def status(self) -> dict[str, Any]:
        """Whether one runs (since when) and the last results, newest first."""
        with self._lock:
            running = None if self._running is None else dict(self._running)
            if running is not None:
                running["elapsed_seconds"] = round(time.monotonic() - running.pop("_t"), 1)
            return {"running": running, "results": list(reversed(self.results[-20:]))}

    def start(self, make_runtime: Callable[[], Any]) -> bool:
        """Start a verification unless one is running; whether one was started."""
        with self._lock:
            if self._running is not None:
                return False
            runtime = make_runtime()
            self._running = {"started": format_ts(runtime.clock.now()), "_t": time.monotonic()}
        threading.Thread(target=self._run, args=(runtime,), daemon=True).start()
        return True

    def _run(self, runtime: Any) -> None:
        from ledger.services.chain.findings import verify_and_remember

        started = self._running["started"] if self._running else None
        try:
            outcome = verify_and_remember(runtime)
            result: dict[str, Any] = (
                {"ok": True, "entries": 0, "line": None, "reason": None}
                if outcome is None
                else {
                    "ok": outcome.ok,
                    "entries": outcome.entries,
                    "line": outcome.line,
                    "reason": outcome.reason,
                }
            )
        except LedgerError as exc:
            result = {"ok": False, "entries": None, "line": None, "reason": str(exc)}
        result["started"] = started
        result["finished"] = format_ts(runtime.clock.now())
        with self._lock:
            self.results.append(result)
            self._running = None
