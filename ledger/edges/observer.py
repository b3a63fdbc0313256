"""Running a UsageObserver (SPEC §5): no shell, a timeout, bounded output.

The observer runs as ``<command…> <provider>`` in its own session (so a timeout
can kill everything it started), with stdin from ``/dev/null``, stderr
discarded, and a minimal environment: ``PATH``, ``HOME``, ``LANG``, the
variables an observer may need (``*_ADMIN_KEY``, ``LEDGER_OBSERVER_*``,
``ANTHROPIC_*``, ``OPENAI_*``) and the names ``observer.env`` lists. Its stdout
is read incrementally and never kept beyond 64 KiB. Whatever the observer does
— hang, crash, flood, vanish — the result is a value, never an exception.
"""

import contextlib
import datetime as dt
import os
import selectors
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Final, Protocol

from ledger.core.observation import (
    PROVIDER_RE,
    Deferred,
    Reading,
    Unreachable,
    clean_reason,
    parse_observer_output,
)
from ledger.edges.clock import monotonic

MAX_OUTPUT_BYTES: Final = 64 * 1024
_READ_CHUNK: Final = 16 * 1024
_PASSED_NAMES: Final = ("PATH", "HOME", "LANG")
_PASSED_PREFIXES: Final = ("LEDGER_OBSERVER_", "ANTHROPIC_", "OPENAI_")
_PASSED_SUFFIXES: Final = ("_ADMIN_KEY",)
_REAP_SECONDS: Final = 5.0


class Clock(Protocol):
    """Where the time comes from."""

    def now(self) -> dt.datetime:
        """The current time, timezone-aware."""
        ...


def observer_environment(
    environ: Mapping[str, str] | None = None, passed: tuple[str, ...] = ()
) -> dict[str, str]:
    """The environment an observer sees: the few variables it may need, nothing else.

    Args:
        environ: where the variables come from (default: this process's).
        passed: names ``observer.env`` adds (a proxy, a CA bundle, a cloud profile).
    """
    source = os.environ if environ is None else environ
    return {
        name: value
        for name, value in source.items()
        if name in _PASSED_NAMES
        or name in passed
        or name.startswith(_PASSED_PREFIXES)
        or name.endswith(_PASSED_SUFFIXES)
    }


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the observer's whole process group, then reap the observer.

    The observer is not reaped before this, so its pid (= its group id) cannot
    have been reused.
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored
        proc.wait(timeout=_REAP_SECONDS)


def _collect(proc: subprocess.Popen[bytes], deadline: float) -> bytes | str:
    """Read stdout to EOF before ``deadline``; the bytes, or the reason it failed."""
    assert proc.stdout is not None  # noqa: S101 - Popen was given stdout=PIPE
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - monotonic()
            if remaining <= 0 or not selector.select(timeout=remaining):
                return "timeout"
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except BlockingIOError:
                continue
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_OUTPUT_BYTES:
                return "output over 64 KiB"
            chunks.append(chunk)


def _start(argv: list[str], passed: tuple[str, ...]) -> subprocess.Popen[bytes] | str:
    """Start the observer, or say why it could not be started."""
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=observer_environment(passed=passed),
            start_new_session=True,
            close_fds=True,
        )
    except FileNotFoundError:
        return f"observer not found: {argv[0]}"
    except PermissionError:
        return f"observer not executable (permission denied): {argv[0]}"
    except OSError as exc:
        return f"observer could not be started: {argv[0]}: {exc.strerror or exc}"
    except (ValueError, TypeError) as exc:
        return f"observer command is invalid: {exc}"


def _finish(proc: subprocess.Popen[bytes], timeout_seconds: int) -> bytes | str:
    """Wait for the observer within the timeout; its stdout, or why it gave none."""
    timed_out = f"observer timed out after {timeout_seconds} s"
    deadline = monotonic() + max(timeout_seconds, 0)
    output = _collect(proc, deadline)
    if isinstance(output, str):
        _kill_group(proc)
        return timed_out if output == "timeout" else output
    try:
        status = proc.wait(timeout=max(deadline - monotonic(), 0.001))
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return timed_out
    if status < 0:
        return f"observer killed by signal {-status}"
    if status != 0:
        return f"observer exited with status {status}"
    return output


class ObserverDeferred(Exception):  # noqa: N818 - not an error: the work goes elsewhere
    """An observer was to run where nothing may wait on a process (an event loop's thread)."""


# Set while a decision runs on an event loop's own thread: running an observer
# there would stall every other request, so its caller hands the work over.
_DEFERRED: ContextVar[bool] = ContextVar("ledger_observer_deferred", default=False)


@contextlib.contextmanager
def observers_deferred() -> Iterator[None]:
    """In the block, ``run_observer`` raises ``ObserverDeferred`` instead of starting one."""
    token = _DEFERRED.set(True)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


def run_observer(
    command: tuple[str, ...],
    provider: str,
    timeout_seconds: int,
    clock: Clock,
    passed_env: tuple[str, ...] = (),
) -> Reading | Unreachable | Deferred:
    """Run the observer for ``provider`` and interpret its output.

    Args:
        command: the ``observer.command`` argv; ``provider`` is appended.
        provider: the provider id to observe (``aggregate`` = all).
        timeout_seconds: wall-clock limit for the whole run; on expiry the
            observer's process group is killed.
        clock: ``fetched_at`` is ``clock.now()`` when the observer is started.
        passed_env: the ``observer.env`` names passed through besides the usual few.

    Returns:
        The parsed result. Not starting, a timeout, more than 64 KiB of output,
        a non-zero exit or malformed output are all ``Unreachable`` with a reason.

    Raises:
        ValueError: ``provider`` is not a valid provider id, or the clock gave a
            naive time (bugs of the caller; the observer's misbehaviour never raises).
        ObserverDeferred: inside ``observers_deferred``; nothing was started.
    """
    if _DEFERRED.get():
        raise ObserverDeferred(provider)
    if not PROVIDER_RE.fullmatch(provider):
        raise ValueError(f"bad provider id: {provider!r}")
    fetched_at = clock.now()
    if not command:
        return Unreachable(provider, "no observer command configured", fetched_at)
    started = _start([*command, provider], passed_env)
    if isinstance(started, str):
        return Unreachable(provider, clean_reason(started, "observer not started"), fetched_at)
    try:
        outcome = _finish(started, timeout_seconds)
    finally:
        if started.stdout is not None:
            started.stdout.close()
        if started.returncode is None:
            _kill_group(started)
    if isinstance(outcome, str):
        return Unreachable(provider, outcome, fetched_at)
    return parse_observer_output(provider, outcome, fetched_at)
