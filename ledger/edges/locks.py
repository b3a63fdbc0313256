"""Named cross-process locks beside the chain (``<home>/<name>.lock``)."""

import contextlib
import fcntl
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

from ledger.edges.clock import monotonic
from ledger.edges.fileio import open_regular
from ledger.errors import ChainIOError, LockTimeoutError


class _LockWaitExpiredError(Exception):
    pass


def _raise_expired(_signum: int, _frame: object) -> None:
    raise _LockWaitExpiredError


def flock_with_timeout(fd: int, timeout: float, *, shared: bool = False) -> bool:
    """Take ``LOCK_EX`` (or ``LOCK_SH``) on ``fd``; ``False`` if ``timeout`` passes first."""
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    with contextlib.suppress(BlockingIOError):
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return True
    if timeout <= 0:
        return False
    # Someone else's interval timer (a test runner's timeout, say) must not be
    # cancelled: then poll instead.
    timer_in_use = signal.getitimer(signal.ITIMER_REAL)[0] > 0
    if threading.current_thread() is threading.main_thread() and not timer_in_use:
        # A blocking flock woken by an interval timer: no polling latency.
        previous = signal.signal(signal.SIGALRM, _raise_expired)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            fcntl.flock(fd, mode)
        except _LockWaitExpiredError:
            return False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return True
    deadline = monotonic() + timeout
    pause = 0.001
    while monotonic() < deadline:
        with contextlib.suppress(BlockingIOError):
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        threading.Event().wait(pause)
        pause = min(pause * 2, 0.02)
    return False


@contextlib.contextmanager
def exclusive_lock(path: Path, timeout: float) -> Iterator[None]:
    """Hold ``flock(LOCK_EX)`` on ``path`` for the block.

    Raises:
        LockTimeoutError: not acquired within ``timeout`` seconds.
        ChainIOError: the lock file cannot be opened, or is not a regular file.
    """
    try:
        try:
            fd = open_regular(path, os.O_RDWR | os.O_CREAT)
        except FileNotFoundError:
            # Its folder is missing (a first write): made only then, not per lock.
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_regular(path, os.O_RDWR | os.O_CREAT)
    except OSError as exc:
        raise ChainIOError(f"cannot open {path}: {exc.strerror}") from exc
    try:
        if not flock_with_timeout(fd, timeout):
            raise LockTimeoutError(f"lock {path} still held after {timeout:g} s")
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


@contextlib.contextmanager
def shared_lock(path: Path, timeout: float) -> Iterator[None]:
    """Hold ``flock(LOCK_SH)`` on ``path`` if it exists; create nothing.

    Readers share the lock and wait only for a writer. Without a lock file no
    writer has ever appended, and there is nothing to wait for.

    Raises:
        LockTimeoutError: a writer held the lock longer than ``timeout``.
        ChainIOError: the lock file exists but cannot be opened, or is not a
            regular file (a FIFO there would block the open forever).
    """
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        yield
        return
    except OSError as exc:
        raise ChainIOError(f"cannot open {path}: {exc.strerror}") from exc
    try:
        if not flock_with_timeout(fd, timeout, shared=True):
            raise LockTimeoutError(f"lock {path} still held after {timeout:g} s")
        yield
    finally:
        os.close(fd)
