"""``ledger serve``: one process per home answering the per-call commands (SPEC §9).

One thread and a ``selectors`` loop. Connections are accepted and read without
blocking; a connection from another uid (``SO_PEERCRED``) is refused at once.
Each complete request joins the next batch. A batch runs inside one group
commit on the home's chain: requests are decided one at a time, in arrival
order, each in its own transaction under the lock the group holds; the group's
appends are fsync'd once; only then is each request answered. While a batch
runs, new requests wait in the kernel's buffers, so batches grow with the load.

The process is the home's only server: ``gate.lock`` is held (``flock``) for its
lifetime, so a second ``ledger serve`` exits 75, and a ``gate.sock`` left behind
by a killed server is replaced. SIGTERM and SIGINT stop accepting (the socket is
removed, so new clients run in-process at once), answer every request already
accepted, and exit 0.
"""

import contextlib
import datetime as dt
import fcntl
import os
import selectors
import signal
import socket
import stat
import struct
import sys
from pathlib import Path
from typing import TextIO

from ledger.edges.clock import monotonic
from ledger.errors import ChainIOError, LockTimeoutError
from ledger.server.batches import Batches, Execute
from ledger.server.protocol import (
    HEADER_SIZE,
    MAX_REQUEST,
    REQUEST_MAGIC,
    SOCKET_NAME,
    STATUS_DECLINED,
    STATUS_REFUSED,
    ProtocolError,
    Reply,
    Request,
    body_length,
)

LOCK_NAME = "gate.lock"
BATCH_LIMIT = 256
READ_TIMEOUT = 10.0  # a connection that has not sent its whole request by then is closed
SEND_TIMEOUT = 5.0
DRAIN_TIMEOUT = 10.0
_UCRED = struct.Struct("3i")
_UNIX_PATH_MAX = 107


class ServerBusyError(LockTimeoutError):
    """Another server already answers for this home."""


class _Connection:
    __slots__ = ("buffer", "deadline", "registered", "sock")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.deadline = deadline
        self.registered = False  # with the selector (its request did not come at once)


class Server:
    """The resident gate of one home."""

    def __init__(
        self,
        home: Path,
        execute: Execute,
        *,
        log: TextIO | None = None,
        batch_limit: int = BATCH_LIMIT,
    ) -> None:
        """A server for ``home``.

        Args:
            home: the home directory (it must exist).
            execute: runs one request as the in-process front door would.
            log: where start, stop, refusals and commit failures are logged
                (default: this process's stderr as it is now).
            batch_limit: at most this many requests per group commit.
        """
        self.home = Path(os.path.abspath(home))  # noqa: PTH100 - keep the caller's links
        self.socket_path = self.home / SOCKET_NAME
        self.batcher = Batches(self.home, execute, self.log)
        self._log_stream = log or sys.stderr
        self._batch_limit = batch_limit
        self._selector = selectors.DefaultSelector()
        self._connections: dict[int, _Connection] = {}
        self._ready: list[tuple[socket.socket, Request]] = []
        self._listener: socket.socket | None = None
        self._socket_inode: int | None = None
        self._stopping = False
        self.served = 0
        self.batches = 0

    def log(self, message: str) -> None:
        """One line on the server's log."""
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: TID251 - log stamps
        self._log_stream.write(f"{stamp} ledger-serve: {message}\n")
        self._log_stream.flush()

    # ------------------------------------------------------------------ lifetime

    def serve(self) -> int:
        """Answer requests until SIGTERM or SIGINT; 0 after a clean drain.

        Raises:
            ServerBusyError: another server holds ``gate.lock``.
            ChainIOError: the socket or the lock file cannot be made.
        """
        lock_fd = self._take_instance_lock()
        wake_read, wake_write = socket.socketpair()
        for sock in (wake_read, wake_write):
            sock.setblocking(False)
        # Signals are ours before the socket exists: a SIGTERM that comes as
        # soon as a client can connect is a drain, never an abrupt death.
        old_wakeup = signal.set_wakeup_fd(wake_write.fileno(), warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        try:
            self._listener = self._listen()
            self._selector.register(self._listener, selectors.EVENT_READ, "listen")
            self._selector.register(wake_read, selectors.EVENT_READ, "wake")
            self.batcher.make_predecessor_durable()
            self.log(f"serving {self.socket_path} (pid {os.getpid()})")
            self._loop(wake_read)
        finally:
            self._close_listener()
            for connection in list(self._connections.values()):
                self._drop(connection.sock)
            self.batcher.close()
            self._selector.close()
            signal.set_wakeup_fd(old_wakeup)
            # The handlers stay: a second SIGTERM while the process winds down is
            # the same request to stop, not a reason to die with -15.
            wake_read.close()
            wake_write.close()
            os.close(lock_fd)
        self.log(f"stopped after {self.served} requests in {self.batches} batches")
        return 0

    def _on_signal(self, _signum: int, _frame: object) -> None:
        self._stopping = True

    def _take_instance_lock(self) -> int:
        path = self.home / LOCK_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise ChainIOError(f"cannot open {path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ServerBusyError(f"another `ledger serve` answers for {self.home}") from None
        return fd

    def _listen(self) -> socket.socket:
        path = self.socket_path
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            mode = None
        except OSError as exc:
            raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
        if mode is not None:
            if not stat.S_ISSOCK(mode):
                raise ChainIOError(f"{path} is in the way: not a socket")
            path.unlink()  # left by a killed server: gate.lock says none is running
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        directory = -1
        old_umask = os.umask(0o177)  # 0600 from the first moment
        try:
            target = str(path)
            if len(os.fsencode(target)) > _UNIX_PATH_MAX:
                directory = os.open(self.home, os.O_PATH | os.O_DIRECTORY)
                target = f"/proc/self/fd/{directory}/{SOCKET_NAME}"
            listener.bind(target)
            path.chmod(0o600)
            listener.listen(socket.SOMAXCONN)
        except OSError as exc:
            listener.close()
            raise ChainIOError(f"cannot listen on {path}: {exc.strerror}") from exc
        finally:
            os.umask(old_umask)
            if directory >= 0:
                os.close(directory)
        listener.setblocking(False)
        self._socket_inode = path.stat().st_ino
        return listener

    def _close_listener(self) -> None:
        if self._listener is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(self._listener)
        self._listener.close()
        self._listener = None
        # Remove the socket only if it is still ours.
        with contextlib.suppress(OSError):
            if self.socket_path.lstat().st_ino == self._socket_inode:
                self.socket_path.unlink()

    # ------------------------------------------------------------------ the loop

    def _loop(self, wake: socket.socket) -> None:
        drain_until: float | None = None
        while True:
            if self._stopping and drain_until is None:
                self._accept()  # whatever already waits in the backlog is answered
                self._close_listener()
                drain_until = monotonic() + DRAIN_TIMEOUT
                self.log("stopping: draining accepted requests")
            if drain_until is not None and not self._connections and not self._ready:
                return
            timeout = 0.0 if self._ready else self._next_timeout(drain_until)
            for key, _events in self._selector.select(timeout):
                if key.data == "listen":
                    self._accept()
                elif key.data == "wake":
                    with contextlib.suppress(OSError):
                        while wake.recv(4096):
                            pass
                else:
                    self._read(key.data)
            self._expire(drain_until)
            if self._ready:
                batch, self._ready = (
                    self._ready[: self._batch_limit],
                    self._ready[self._batch_limit :],
                )
                self._answer(batch)

    def _next_timeout(self, drain_until: float | None) -> float | None:
        deadlines = [c.deadline for c in self._connections.values()]
        if drain_until is not None:
            deadlines.append(drain_until)
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - monotonic())

    def _expire(self, drain_until: float | None) -> None:
        now = monotonic()
        for connection in list(self._connections.values()):
            if connection.deadline <= now or (drain_until is not None and drain_until <= now):
                self._drop(connection.sock)

    def _accept(self) -> None:
        while self._listener is not None:
            try:
                sock, _address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self.log(f"accept failed: {exc.strerror}")
                return
            try:
                pid, uid, _gid = _UCRED.unpack(
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
                )
            except OSError:
                sock.close()
                continue
            if uid != os.geteuid():
                self.log(f"refused a peer of uid {uid} (pid {pid})")
                sock.setblocking(False)  # _send never waits unbounded
                self._send(sock, Reply(STATUS_REFUSED).encode())
                continue
            sock.setblocking(False)
            connection = _Connection(sock, monotonic() + READ_TIMEOUT)
            self._connections[sock.fileno()] = connection
            # A client sends its request as soon as it connects: it is usually
            # here already, and then needs no round through the selector.
            if self._take(connection) is False:
                self._selector.register(sock, selectors.EVENT_READ, sock.fileno())
                connection.registered = True

    def _read(self, fd: int) -> None:
        self._take(self._connections[fd])

    def _take(self, connection: _Connection) -> bool | None:
        """Read what has arrived; ``False`` when the request is not complete yet."""
        try:
            chunk = connection.sock.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(connection.sock)
            return None
        connection.buffer += chunk
        if len(connection.buffer) < HEADER_SIZE:
            return False
        try:
            length = body_length(bytes(connection.buffer[:HEADER_SIZE]), REQUEST_MAGIC, MAX_REQUEST)
            if len(connection.buffer) < HEADER_SIZE + length:
                return False
            request = Request.decode(bytes(connection.buffer[HEADER_SIZE : HEADER_SIZE + length]))
        except ProtocolError as exc:
            self.log(f"declined a request: {exc}")
            self._forget(connection.sock)
            self._send(connection.sock, Reply(STATUS_DECLINED).encode())
            return None
        self._forget(connection.sock)
        self._ready.append((connection.sock, request))
        return True

    def _forget(self, sock: socket.socket) -> None:
        connection = self._connections.pop(sock.fileno(), None)
        if connection is None or connection.registered:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)

    def _drop(self, sock: socket.socket) -> None:
        self._forget(sock)
        sock.close()

    def _send(self, sock: socket.socket, data: bytes) -> None:
        try:
            # A reply nearly always fits the socket's buffer at once; only the
            # rest, if any, waits (bounded) for a slow client.
            sent = sock.send(data)
            if sent < len(data):
                sock.settimeout(SEND_TIMEOUT)
                sock.sendall(data[sent:])
        except OSError:
            pass  # the client is gone (or its buffer is full); its retry answers in-process
        finally:
            sock.close()

    # ------------------------------------------------------------------ batches

    def _answer(self, batch: list[tuple[socket.socket, Request]]) -> None:
        """Decide a batch in one group commit, then reply to each request in it."""
        requests = [request for _sock, request in batch]
        replies = self.batcher.run(requests)
        self.batches += 1
        self.served += len(batch)
        for (sock, _request), data in zip(batch, replies, strict=True):
            self._send(sock, data)
        # Time the server spent deciding is not a slow client's.
        patience = monotonic() + READ_TIMEOUT
        for connection in self._connections.values():
            connection.deadline = max(connection.deadline, patience)
