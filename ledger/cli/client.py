"""The per-call commands' way to ``ledger serve`` (SPEC §9), tried before anything else.

``ledger.cli.main`` calls ``through_server`` before it imports argparse or any of
the product: a hook pays for the interpreter, this module and one round trip on
``gate.sock``, not for ``cryptography`` and the services. Only the standard
library's ``os``, ``sys`` and ``_socket`` are used (``socket`` itself imports
``enum`` and ``selectors``, a few milliseconds a call).

``None`` means "run in-process": no server (no socket, or a stale one left by a
killed server: connecting is refused at once), ``LEDGER_NO_SERVER=1``, a command
the server does not answer, a server of another uid, or a server that declines.
A server lost after the request was sent (connection closed, reply timeout) is
answered in-process once, with the same request id. Every entry a served
request seals carries that id, so whichever of the server and the retry comes
second finds the first one's entries under the chain lock, seals nothing, and
prints the first one's reply (``ledger.cli.percall.served``).
"""

import _socket
import os
import sys

from ledger.server.protocol import (
    HEADER_SIZE,
    MAX_REPLY,
    MAX_REQUEST,
    REPLY_MAGIC,
    SOCKET_NAME,
    STATUS_OK,
    ProtocolError,
    Reply,
    Request,
    body_length,
)

# The per-call commands the server answers (SPEC §9); None: every sub-command.
SERVED: dict[str, frozenset[str] | None] = {
    "verdict": None,
    "record": None,
    "usage": None,
    "hook": frozenset(
        {"pre-tool-use", "post-tool-use", "stop", "user-prompt-submit", "session-end"}
    ),
    "tokens": frozenset({"check", "record"}),
    "tools": frozenset({"use", "check"}),
    "turns": frozenset({"record", "check"}),
}
NO_SERVER_VARIABLE = "LEDGER_NO_SERVER"
TIMEOUT_VARIABLE = "LEDGER_SERVER_TIMEOUT"
CONNECT_TIMEOUT = 1.0
# Above the longest a command may legitimately take in-process: a chain lock
# wait (10 s by default) plus an observer run (30 s by default).
DEFAULT_REPLY_TIMEOUT = 60.0
_UNIX_PATH_MAX = 107
_UCRED_SIZE = 12  # struct ucred: pid, uid, gid
_WITH_ACTION = 2  # a command and its action (``tokens check``); ``--`` alone is no help


class ServerLostError(Exception):
    """The request may have reached the server, but no reply came back."""


def served(rest: list[str]) -> bool:
    """Whether the server answers this command line (the command and its arguments)."""
    if not rest or rest[0] not in SERVED:
        return False
    if "--gateway" in rest:
        return False  # a machine without a home (a laptop) asks its gateway, not a server
    actions = SERVED[rest[0]]
    if actions is not None and (len(rest) < _WITH_ACTION or rest[1] not in actions):
        return False
    # Help is printed in-process: it is never on a hook's path.
    return not any(
        arg == "-h" or (len(arg) > len("--") and "--help".startswith(arg)) for arg in rest
    )


def reads_stdin(rest: list[str]) -> bool:
    """Whether the command reads stdin: hooks, and ``record --usage-json -``."""
    if rest[0] == "hook":
        return True
    return rest[0] == "record" and any(arg == "-" or arg.endswith("=-") for arg in rest[1:])


def socket_path(home_option: str | None) -> str:
    """``gate.sock`` in the home the command would use (SPEC §1)."""
    home = home_option or os.environ.get("LEDGER_HOME") or ".ledger"
    return os.path.join(home, SOCKET_NAME)  # noqa: PTH118 - pathlib costs milliseconds here


def reply_timeout() -> float:
    """``LEDGER_SERVER_TIMEOUT`` seconds (a positive number), else the default."""
    try:
        value = float(os.environ.get(TIMEOUT_VARIABLE, ""))
    except ValueError:
        return DEFAULT_REPLY_TIMEOUT
    return value if value > 0 else DEFAULT_REPLY_TIMEOUT


def _codec(stream: object) -> tuple[str, str] | None:
    encoding = getattr(stream, "encoding", None)
    errors = getattr(stream, "errors", None)
    if not isinstance(encoding, str) or not isinstance(errors, str):
        return None
    return encoding, errors


def _columns() -> int:
    """The width argparse would wrap at here (``shutil.get_terminal_size`` without shutil)."""
    try:
        from_env = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        from_env = 0
    if from_env > 0:
        return from_env
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # no stdout at all is the AttributeError
        return 80


def _connect(path: str) -> _socket.socket | None:
    """A connected socket to a server of this uid, or ``None``."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    directory = -1
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        target = path
        if len(os.fsencode(path)) > _UNIX_PATH_MAX:
            # Too long for sun_path: reach it through the directory's descriptor.
            head, name = os.path.split(path)
            directory = os.open(head or ".", os.O_PATH | os.O_DIRECTORY)
            target = f"/proc/self/fd/{directory}/{name}"
        sock.connect(target)
        credentials = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, _UCRED_SIZE)
        if int.from_bytes(credentials[4:8], sys.byteorder) != os.geteuid():
            sock.close()
            return None
    except (OSError, ValueError):  # ValueError: a NUL byte in the home's path
        sock.close()
        return None
    finally:
        if directory >= 0:
            os.close(directory)
    return sock


def _receive(sock: _socket.socket, size: int) -> bytes:
    chunks = []
    remaining = size
    while remaining > 0:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise ServerLostError("connection closed before the reply")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def exchange(sock: _socket.socket, data: bytes, timeout: float) -> Reply:
    """Send one request frame and wait (at most ``timeout`` s per read) for its reply.

    Raises:
        ServerLostError: the connection failed, closed or timed out.
    """
    try:
        sock.settimeout(timeout)
        sock.sendall(data)
        header = _receive(sock, HEADER_SIZE)
        body = _receive(sock, body_length(header, REPLY_MAGIC, MAX_REPLY))
        return Reply.decode(body)
    except (OSError, ProtocolError) as exc:
        raise ServerLostError(str(exc)) from exc
    finally:
        sock.close()


def build_request(args: list[str]) -> Request | None:
    """The request for ``args`` (stdin not yet read), or ``None`` when it cannot be sent."""
    stdout_codec, stderr_codec = _codec(sys.stdout), _codec(sys.stderr)
    stdin_codec = _codec(sys.stdin) or ("utf-8", "strict")
    if stdout_codec is None or stderr_codec is None:
        return None
    try:
        cwd = os.getcwdb()  # noqa: PTH109 - bytes: any directory name, no pathlib
    except OSError:
        return None
    return Request(
        "rq-" + os.urandom(16).hex(),
        cwd,
        [os.fsencode(arg) for arg in args],
        [name + b"=" + value for name, value in os.environb.items()],
        stdin_codec=stdin_codec,
        stdout_codec=stdout_codec,
        stderr_codec=stderr_codec,
        columns=_columns(),
    )


def replay(reply: Reply) -> int:
    """Write what the command wrote, on this process's own streams; its exit code."""
    for stream, text in reply.writes:
        (sys.stdout if stream == 1 else sys.stderr).write(text)
    return reply.code


def through_server(home_option: str | None, rest: list[str], args: list[str]) -> int | None:
    """Answer the command through ``gate.sock``; ``None``: run it in-process as usual.

    Args:
        home_option: ``--home`` as given, if it was.
        rest: the command and its arguments.
        args: the whole command line after ``ledger`` (sent as it is).
    """
    if os.environ.get(NO_SERVER_VARIABLE, "") not in ("", "0") or not served(rest):
        return None
    needs_stdin = reads_stdin(rest)
    if needs_stdin and (sys.stdin is None or sys.stdin.isatty()):
        return None
    sock = _connect(socket_path(home_option))
    if sock is None:
        return None  # the usual case without a server: nothing else was spent
    request = build_request(args)
    if request is None:
        sock.close()
        return None
    if needs_stdin:
        buffer = getattr(sys.stdin, "buffer", None)
        request.stdin = buffer.read() if buffer is not None else sys.stdin.read().encode()
    data = request.encode()
    if len(data) > MAX_REQUEST:
        sock.close()
        return answer_here(request)
    try:
        reply = exchange(sock, data, reply_timeout())
    except ServerLostError:
        return answer_here(request, retry=True)
    if reply.status != STATUS_OK:
        # Declined or refused: nothing was run there.
        return None if request.stdin is None else answer_here(request)
    return replay(reply)


def answer_here(request: Request, *, retry: bool = False) -> int:
    """Run the request in this process: its stdin is already read, or the server was lost.

    A retry carries the lost request's id (so a record's idempotency key) and
    makes the chain durable before it answers: what the lost server wrote and
    did not yet fsync is found as a duplicate, and must not be acknowledged
    while it could still vanish.
    """
    from ledger.cli.percall.served import run_here

    return replay(run_here(request, retry=retry))
