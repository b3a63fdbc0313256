"""Running one per-call request exactly as the in-process front door would (SPEC §9).

The server runs every request here, and so does a client whose server was lost.
For the length of a request the process takes on the client's environment,
working directory, stdin and stream encodings, runs ``ledger.cli.percall.parser.run`` and
records what it writes. Those are process-wide, so requests run one at a time.

Every served request is sealed once, whoever runs it (the server, or a client
whose server was late or lost): its entries carry the request id, a second run
finds them under the chain lock before it writes anything and prints the
first run's reply instead, kept in the home's ``replies.jsonl`` (see
``ledger.services.chain.requests``). ``record`` and ``tokens record`` without a key of
their own also get the request id as their idempotency key, so such a record
is found even when its first run left no reply; the key is printed as
``null``, as the command would have printed it without one.
"""

import io
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from ledger.cli.arguments import split_global_options
from ledger.server.protocol import STATUS_DECLINED, STATUS_OK, Reply, Request

if TYPE_CHECKING:
    from ledger.edges.files.replies import Replies

_KEY_OPTION = "--idempotency-key"
# The run that sealed the request left no reply: the caller gets the exit code
# of an I/O failure, never a second seal.
EXIT_REPLY_LOST = 74


class Capture(io.TextIOBase):
    """A text stream that records each write, encodable as the client's stream requires."""

    def __init__(self, writes: list[tuple[int, str]], stream: int, codec: tuple[str, str]) -> None:
        super().__init__()
        self._writes = writes
        self._stream = stream
        self._codec = codec

    # TextIOBase's encoding and errors are read-only descriptors: properties it is.
    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The client's encoding for this stream."""
        return self._codec[0]

    @property
    def errors(self) -> str:  # type: ignore[override]
        """The client's error handler for this stream."""
        return self._codec[1]

    def writable(self) -> bool:
        """Always: this is an output stream."""
        return True

    def write(self, text: str) -> int:
        """Record ``text``; fail where the client's own stream would fail to encode it."""
        text.encode(*self._codec)
        self._writes.append((self._stream, text))
        return len(text)


def keyed_argv(argv: list[str], key: str) -> list[str] | None:
    """``argv`` with ``--idempotency-key KEY`` after ``record`` / ``tokens record``.

    The option goes first, so a key the caller gave (in any spelling argparse
    accepts) comes later and wins. ``None`` for the other commands.
    """
    _home, rest = split_global_options(argv)
    if rest[:1] == ["record"]:
        depth = 1
    elif rest[:2] == ["tokens", "record"]:
        depth = 2
    else:
        return None
    at = len(argv) - len(rest) + depth
    return [*argv[:at], _KEY_OPTION, key, *argv[at:]]


def hide_key(
    writes: list[tuple[int, str]], key: str, *, as_first_run: bool = False
) -> list[tuple[int, str]]:
    """Print a request-id key as the ``null`` the caller would have seen without it.

    ``as_first_run``: the writes are a repeat's, which found the record the
    first run sealed; that run printed it with ``"duplicate": false``.
    """
    shown = []
    for stream, text in writes:
        document = None
        if stream == 1 and key in text and text.endswith("\n"):
            try:
                document = json.loads(text)
            except ValueError:
                document = None
        if isinstance(document, dict) and document.get("idempotency_key") == key:
            document["idempotency_key"] = None
            if as_first_run and document.get("duplicate") is True:
                document["duplicate"] = False
            shown.append((stream, json.dumps(document, ensure_ascii=False) + "\n"))
        else:
            shown.append((stream, text))
    return shown


def _exit_code(exc: SystemExit, writes: list[tuple[int, str]]) -> int:
    # The interpreter's own rule for SystemExit's argument.
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    writes.append((2, f"{exc.code}\n"))
    return 1


# The environment a resident server last put in place for a request.
_APPLIED: dict[str, tuple[list[bytes], int]] = {}


def _switch_environment(target: dict[bytes, bytes]) -> None:
    """Make the process environment ``target``, touching only what differs.

    A client's environment is mostly the server's own (same user, same shell),
    so this costs a few lookups rather than a rebuild of every variable.
    """
    current = os.environb
    for name in [name for name in current if name not in target]:
        del current[name]
    for name, value in target.items():
        if current.get(name) != value:
            current[name] = value


def _requested_environment(items: list[bytes], columns: int) -> dict[bytes, bytes]:
    target: dict[bytes, bytes] = {}
    for item in items:
        name, _, value = item.partition(b"=")
        if name and b"\0" not in item:  # a NUL: the client's exec could not have had it
            target[name] = value
    try:
        positive = int(target.get(b"COLUMNS", b"")) > 0
    except ValueError:
        positive = False
    if not positive:
        # argparse wraps usage lines at the client's terminal width, not ours.
        target[b"COLUMNS"] = str(columns or 80).encode("ascii")
    return target


def _home_identity(home_option: str | None) -> tuple[int, int] | None:
    from ledger.homes import resolve_home

    try:
        found = resolve_home(home_option).stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def execute(
    request: Request,
    parser: Any = None,
    home: tuple[int, int] | None = None,
    *,
    resident: bool = False,
) -> Reply:
    """Run ``request`` as the in-process front door would; what it wrote and its exit code.

    Args:
        request: the command line, environment, directory, stdin and streams.
        parser: a prebuilt per-call parser (reused by the server), else a fresh one.
        home: the server's home (device, inode); a request for another home is
            declined.
        resident: the server runs it. The client's environment then stays in
            place after the request, so the next request from the same shell
            (nearly every one) need not switch a hundred variables twice; the
            server's own code never reads the process environment.

    Returns:
        an ``ok`` reply; ``declined`` when the request could not be set up here
        (its directory is gone) or failed outside the command's own error
        handling, so that the client runs it itself.
    """
    from ledger.runtime import settle_environ
    from ledger.services.chain.requests import REQUEST_ID_RE

    if not REQUEST_ID_RE.fullmatch(request.request_id):
        return Reply(STATUS_DECLINED)  # the client runs it without an id of its own
    argv = [os.fsdecode(arg) for arg in request.argv]
    keyed = keyed_argv(argv, request.request_id)
    writes: list[tuple[int, str]] = []
    saved_environ = None if resident else dict(os.environb)
    saved_cwd = os.getcwdb()  # noqa: PTH109 - bytes: any directory name
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    try:
        os.chdir(request.cwd)
    except OSError:
        return Reply(STATUS_DECLINED)
    try:
        raw = (request.environ, request.columns)
        if not resident or raw != _APPLIED.get("raw"):
            settle_environ(None)
            _APPLIED.pop("raw", None)  # a switch that fails halfway leaves nothing applied
            _switch_environment(_requested_environment(request.environ, request.columns))
            _APPLIED["raw"] = raw
            if resident:
                settle_environ(dict(os.environ))
        encoding, errors = request.stdin_codec
        sys.stdin = io.TextIOWrapper(
            io.BytesIO(request.stdin or b""), encoding=encoding, errors=errors, newline="\n"
        )
        sys.stdout = Capture(writes, 1, request.stdout_codec)
        sys.stderr = Capture(writes, 2, request.stderr_codec)
        home_option, rest = split_global_options(keyed or argv)
        if home is not None and _home_identity(home_option) != home:
            return Reply(STATUS_DECLINED)
        code, writes = _run_once(
            request, home_option, rest, parser, writes, keyed=keyed is not None
        )
    except Exception:  # noqa: BLE001 - outside the command's own handling: let the client run it
        return Reply(STATUS_DECLINED)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        if saved_environ is not None:
            _switch_environment(saved_environ)
            _APPLIED.pop("raw", None)
            settle_environ(None)
        os.chdir(saved_cwd)
    return Reply(STATUS_OK, code, writes)


def _run_once(
    request: Request,
    home_option: str | None,
    rest: list[str],
    parser: Any,
    writes: list[tuple[int, str]],
    *,
    keyed: bool,
) -> tuple[int, list[tuple[int, str]]]:
    """Run the command as served request ``request``, or give the reply of the run that did.

    Every entry the run seals carries the request id; a run that finds the id
    already in the chain (checked under the chain lock, before it writes
    anything) stops and answers with the first run's kept reply. A run that
    sealed something keeps its reply for such a retry, before the server's
    group commit lets the chain lock go.
    """
    from ledger.services.chain.requests import AlreadyAnsweredError, answering

    with answering(request.request_id) as scope:
        try:
            code = _run_command(home_option, rest, parser, writes)
        except AlreadyAnsweredError as answered:
            entry_hash = str(answered.record.get("entry_hash"))
            kept = _replies(home_option).load(request.request_id, entry_hash)
            if kept is not None:
                return kept
            if not keyed:
                return _reply_lost(rest, request.request_id, entry_hash)
            # The run that sealed this record was killed between its append and
            # its answer. The record carries the request id as its idempotency
            # key: run again, the command finds that record and prints it.
            scope.stop_when_answered = False
            del writes[:]
            sys.stdin.seek(0)
            code = _run_command(home_option, rest, parser, writes)
            return code, hide_key(writes, request.request_id, as_first_run=True)
        if keyed:
            writes = hide_key(writes, request.request_id)
        if scope.sealed:
            _replies(home_option).save(request.request_id, scope.sealed, code, writes)
    return code, writes


def _run_command(
    home_option: str | None, rest: list[str], parser: Any, writes: list[tuple[int, str]]
) -> int:
    from ledger.cli.percall.parser import run as run_fast

    try:
        return run_fast(home_option, rest, parser=parser)
    except SystemExit as exc:
        return _exit_code(exc, writes)


def _replies(home_option: str | None) -> "Replies":
    from ledger.edges.files.replies import Replies
    from ledger.homes import resolve_home

    return Replies(resolve_home(home_option))


def _reply_lost(
    rest: list[str], request_id: str, entry_hash: str
) -> tuple[int, list[tuple[int, str]]]:
    """The answer when the run that sealed the request kept no reply.

    Sealing again would count the request twice, so the caller is told what
    happened instead: one ``ledger:`` line, exit 74. Hooks exit 0, as they
    always do, and ``pre-tool-use`` fails closed: the tool call is denied.
    """
    line = (
        f"ledger: this request was already sealed (entry {entry_hash[:16]}…, request_id "
        f"{request_id}) by a server that stopped before answering; nothing was sealed again\n"
    )
    if rest[:1] != ["hook"]:
        return EXIT_REPLY_LOST, [(2, line)]
    writes = [(2, line)]
    if rest[1:2] == ["pre-tool-use"]:
        from ledger.core.hook_protocol import pre_tool_use_output

        deny = pre_tool_use_output(
            "ledger: the answer to this tool call was lost with the server that sealed it; "
            "refused (fail-closed)",
            [],
        )
        writes.insert(0, (1, json.dumps(deny, ensure_ascii=False) + "\n"))
    return 0, writes


def make_durable(request: Request) -> str | None:
    """Make the chain of the request's home durable; the failure, if any.

    Run in the request's own environment and directory (a client's retry runs
    in them already).
    """
    from ledger.edges.files.chainfile import ChainFile
    from ledger.edges.files.groupcommit import sync_chain
    from ledger.errors import ChainIOError
    from ledger.homes import resolve_home
    from ledger.runtime import CHAIN_FILE

    home, _rest = split_global_options([os.fsdecode(arg) for arg in request.argv])
    try:
        sync_chain(ChainFile(resolve_home(home) / CHAIN_FILE))
    except ChainIOError as exc:
        return str(exc)
    return None


def run_here(request: Request, *, retry: bool = False) -> Reply:
    """Answer ``request`` in this process (a client whose server declined or was lost).

    A retry makes the chain durable before it answers: an entry the lost server
    wrote but did not fsync is found here as a duplicate, and must not be
    acknowledged while a crash could still take it away.
    """
    reply = execute(request)
    if reply.status != STATUS_OK:
        # Could not be set up even here: run it plainly, on the real streams.
        from ledger.cli.percall.parser import run as run_fast

        home, rest = split_global_options([os.fsdecode(arg) for arg in request.argv])
        if request.stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(request.stdin), newline="\n")
        reply = Reply(STATUS_OK, run_fast(home, rest))
    if retry:
        problem = make_durable(request)
        if problem is not None:
            return Reply(STATUS_OK, 74, [(2, f"ledger: {problem}\n")])
    return reply
