"""SIGTERM and SIGINT as a stop request for the daemon's main thread."""

import contextlib
import os
import select
import signal
from types import FrameType, TracebackType
from typing import Any, Self

# How often the main thread re-checks for a stop request even if no wake-up came.
_STOP_CHECK_SECONDS = 1.0


class StopSignals:
    """SIGTERM and SIGINT as a stop request that the main thread cannot miss.

    The kernel hands a signal sent to the process to any of its threads that
    does not block it, not necessarily the main one. Python runs the handler
    in the main thread only, the next time that thread executes bytecode; a
    main thread blocked on a lock (``threading.Event.wait()``) is woken only
    when the signal lands on it, so a signal taken by a scheduler or job thread
    left it waiting for good. Here whichever thread takes the signal writes a
    byte to a pipe the main thread waits on (``signal.set_wakeup_fd``), the
    wait is bounded and re-checks, and the handler only records the signal: it
    takes no lock and does no I/O, since it may run in the middle of any code
    of the main thread, its logging included.
    """

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self._reader = -1
        self._writer = -1
        self._previous: dict[signal.Signals, Any] = {}
        self._previous_wakeup = -1

    def __enter__(self) -> Self:
        self._reader, self._writer = os.pipe()
        for fd in (self._reader, self._writer):
            os.set_blocking(fd, False)
        self._previous_wakeup = signal.set_wakeup_fd(self._writer, warn_on_full_buffer=False)
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(self._previous_wakeup)
        os.close(self._reader)
        os.close(self._writer)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum)

    def wait(self) -> signal.Signals:
        """Block until SIGTERM or SIGINT has arrived; which one came first."""
        while self.received is None:
            readable, _, _ = select.select([self._reader], [], [], _STOP_CHECK_SECONDS)
            if readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._reader, 512)  # drained: later wake-ups wake it again
        return self.received
