"""Processes the daemon runs and ports it needs: ending with the daemon, naming a port's holder.

A child of ``ledger daemon`` (the resident gate, the gateway, the console) must
not outlive it, not even a ``kill -9`` of the daemon, which runs no code on its
way out. The daemon names itself to each child in ``LEDGER_PARENT_PID``; the
child asks the kernel for a SIGTERM when its parent goes (``PR_SET_PDEATHSIG``
on Linux) and, on every platform, checks once a second that its parent is
still the one named, SIGTERMing itself when not. SIGTERM makes each child
drain as it does under systemd: it answers what it has accepted, then exits.

A port already in use is named with the process that holds it (best effort:
another user's process may not be visible), so the operator knows what to stop.
"""

import contextlib
import errno
import os
import signal
import socket
import sys
import threading

import psutil

from ledger.errors import AddressInUseError, ChainIOError

PARENT_ENV = "LEDGER_PARENT_PID"
_PR_SET_PDEATHSIG = 1
_CHECK_SECONDS = 1.0


def die_with_parent(environ: dict[str, str] | os._Environ[str]) -> None:
    """End this process (SIGTERM) when the daemon named in ``LEDGER_PARENT_PID`` ends.

    The variable is removed from ``environ``: a process this one starts has a
    parent of its own.
    """
    text = environ.pop(PARENT_ENV, None)
    if text is None or not text.isdigit():
        return
    parent = int(text)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    threading.Thread(target=_watch, args=(parent,), name="ledger-parent", daemon=True).start()


def _watch(parent: int) -> None:
    """SIGTERM this process once its parent is no longer ``parent`` (it died: re-parented)."""
    pause = threading.Event()  # never set: a wait that sleeps
    while os.getppid() == parent:
        pause.wait(_CHECK_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)


def port_holder(port: int) -> str | None:
    """``pid N (command line)`` of a process listening on TCP ``port``, if one can be seen."""
    try:
        connections = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return None
    for conn in connections:
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr.port != port:
            continue
        if conn.pid is None:
            return None
        try:
            argv = psutil.Process(conn.pid).cmdline()
        except (psutil.Error, OSError):
            return f"pid {conn.pid}"
        shown = " ".join(argv)[:200]
        return f"pid {conn.pid} ({shown})" if shown else f"pid {conn.pid}"
    return None


def in_use_error(where: str, port: int, setting: str) -> AddressInUseError:
    """The one-line refusal for a port another process holds, naming it when it can."""
    holder = port_holder(port)
    held = f"held by {holder}" if holder else "held by another process"
    return AddressInUseError(
        f"cannot listen on {where}: address already in use ({held}); stop that process "
        f"or choose another {setting}"
    )


def check_free(host: str, port: int, where: str, setting: str) -> None:
    """Refuse now if ``host:port`` cannot be listened on (the gateway binds it just after).

    Raises:
        AddressInUseError: another process listens there (exit 75).
        ChainIOError: the address cannot be bound for another reason.
    """
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise in_use_error(where, port, setting) from exc
            raise ChainIOError(f"cannot listen on {where}: {exc.strerror}") from exc
