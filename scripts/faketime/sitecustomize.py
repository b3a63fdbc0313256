# ruff: noqa: INP001 - a directory put on PYTHONPATH, not a package
"""Loaded only by ``scripts/faketime-run.sh``: time.sleep through select().

libfaketime 0.9.10 (Debian's) shifts the deadline of an absolute
``clock_nanosleep`` by its fake offset even when, with
``FAKETIME_DONT_FAKE_MONOTONIC=1``, the monotonic clock is real; CPython 3.11's
``time.sleep`` sleeps that way, so every sleep fails with EINVAL. ``select``
takes a relative timeout, which the library leaves alone. Lock and event waits
keep working because the monotonic clock they use is not faked.
"""

import select
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


time.sleep = _sleep
