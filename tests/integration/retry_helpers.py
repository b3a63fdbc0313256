"""Helpers for served-request retries: raw requests on the socket, retries as processes."""

import subprocess
import sys
from pathlib import Path

from ledger.server.protocol import Reply, Request
from tests.conftest import REPO, Result, clean_env
from tests.integration.server_helpers import entries
from tests.integration.test_server_lifecycle import connect, raw_request, read_reply


def request_for(
    home: Path, args: tuple[str, ...], request_id: str, stdin: str | None = None
) -> Request:
    """The request a client would send for `ledger --home HOME ARGS` (stdin included)."""
    request = raw_request(home, *args, request_id=request_id)
    request.stdin = stdin.encode() if stdin is not None else None
    return request


def send_and_read(home: Path, request: Request) -> Reply:
    """Send ``request`` to the server and wait for its reply (the reply a client lost)."""
    with connect(home) as sock:
        sock.sendall(request.encode())
        return read_reply(sock)


def retry(request: Request) -> Result:
    """The client's in-process retry of ``request``, as a real process."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.helpers.retry_worker"],
        input=request.encode(),
        capture_output=True,
        env=clean_env(),
        cwd=REPO,
        timeout=120,
        check=False,
    )
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def as_result(reply: Reply) -> Result:
    """What a client prints for ``reply``."""
    out = "".join(text for stream, text in reply.writes if stream == 1)
    err = "".join(text for stream, text in reply.writes if stream == 2)
    return Result(reply.code, out, err)


def sealed_for(home: Path, request_id: str) -> list[str]:
    """The event types of the entries sealed for ``request_id``, in chain order."""
    return [e["event_type"] for e in entries(home) if e["payload"].get("request_id") == request_id]
