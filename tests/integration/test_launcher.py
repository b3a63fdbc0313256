"""The installed `ledger` command: the front door and nothing before it (SPEC §9).

A hook runs `ledger` before every tool call and the server answers in a couple
of milliseconds, so what the command loads before asking it is most of a served
call's cost beyond the interpreter. These tests run the installed script itself
(its own shebang), against a real server and against a stand-in one that
records the request it is sent.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.server.protocol import (
    HEADER_SIZE,
    MAX_REQUEST,
    REQUEST_MAGIC,
    STATUS_OK,
    Reply,
    Request,
    body_length,
)
from tests.conftest import REPO, clean_env
from tests.integration.server_helpers import HOOKS, NOW, init_home, start_server

pytestmark = pytest.mark.timeout(300)

# What a served call may import beyond what the bare interpreter already has.
FRONT_DOOR = {
    "ledger",
    "ledger.cli",
    "ledger.cli.arguments",
    "ledger.cli.client",
    "ledger.server",
    "ledger.server.protocol",
    "_socket",
}


def installed_script() -> Path:
    """The `ledger` command of the interpreter running the tests."""
    beside = Path(sys.executable).parent / "ledger"
    found = beside if beside.exists() else shutil.which("ledger")
    assert found is not None, "no `ledger` command installed (pip install -e .)"
    return Path(found)


def interpreter_of(script: Path) -> str:
    first = script.read_bytes().split(b"\n", 1)[0]
    assert first.startswith(b"#!"), first
    return os.fsdecode(first[2:].strip())


def imported(argv: list[str], env: dict[str, str], stdin: bytes | None = None) -> set[str]:
    """The modules a process imported (``PYTHONPROFILEIMPORTTIME``); it must exit 0."""
    proc = subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
        check=False,
    )
    stderr = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, stderr
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    } - {"imported package"}


def test_the_installed_command_is_the_launcher():
    """`ledger` is bin/ledger with its `#!python` line pointed at the venv, not pip's wrapper."""
    script = installed_script()
    installed = script.read_bytes().split(b"\n", 1)
    shipped = (REPO / "bin" / "ledger").read_bytes().split(b"\n", 1)
    assert shipped[0] == b"#!python"
    assert installed[1] == shipped[1]
    assert Path(interpreter_of(script)).exists()
    assert os.access(script, os.X_OK)


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (("verdict", "0.01"), None),
        (("hook", "pre-tool-use"), (HOOKS / "pre_tool_use_bash.json").read_bytes()),
    ],
    ids=["verdict", "hook"],
)
def test_a_served_call_imports_only_the_front_door(
    tmp_path: Path, args: tuple[str, ...], stdin: bytes | None
):
    """Beyond `python -c pass`: our four modules, the protocol and `_socket`; no `re`, `json`."""
    script = installed_script()
    home = init_home(tmp_path / "home")
    env = clean_env(LEDGER_NOW=NOW)
    bare = imported([interpreter_of(script), "-c", "pass"], env)
    server = start_server(home)
    try:
        served = imported([str(script), "--home", str(home), *args], env, stdin)
    finally:
        assert server.stop() == 0
    assert server.served_count() == 1
    assert served - bare <= FRONT_DOOR, sorted(served - bare - FRONT_DOOR)
    assert not {"re", "json", "cryptography", "argparse", "typing", "encodings.idna"} & served
    # Without the server the same command loads the product: the check can see it.
    in_process = imported([str(script), "--home", str(home), *args], env, stdin)
    assert {"argparse", "cryptography", "ledger.cli.percall.parser"} <= in_process


class StandInServer:
    """One connection on `gate.sock`: keeps the request it reads, sends a set reply."""

    def __init__(self, home: Path, reply: Reply) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(home / "gate.sock"))
        self.listener.listen(1)
        self.listener.settimeout(60)
        self.reply = reply
        self.requests: list[Request] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            data = b""
            while len(data) < HEADER_SIZE or len(data) < HEADER_SIZE + body_length(
                data[:HEADER_SIZE], REQUEST_MAGIC, MAX_REQUEST
            ):
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return
                data += chunk
            self.requests.append(Request.decode(data[HEADER_SIZE:]))
            conn.sendall(self.reply.encode())

    def close(self) -> None:
        self.thread.join(timeout=60)
        self.listener.close()


@pytest.fixture
def short_home() -> Iterator[Path]:
    """A home whose socket path fits in sun_path, for the stand-in to bind."""
    path = Path(tempfile.mkdtemp(prefix="lg-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def buffered_env(**extra: str) -> dict[str, str]:
    """The test environment with the standard streams buffered, as they are by default."""
    env = clean_env(**extra)
    env.pop("PYTHONUNBUFFERED", None)
    return env


def test_the_hook_forwards_stdin_as_bytes_and_replays_the_reply(short_home: Path):
    """Stdin reaches the server byte for byte; the reply's writes and code come back as sent.

    The stderr write has no newline at its end: the command must still flush it
    (buffered, as usual) before it exits without the interpreter's teardown.
    """
    stdin = b'\xef\xbb\xbf{"tool_name": "Bash",\r\n "x": "\xff\xfe\x00 caf\xc3\xa9"}'
    reply = Reply(STATUS_OK, 3, [(1, "{}\n"), (2, "a note, unterminated"), (1, "é ✓\n")])
    stand_in = StandInServer(short_home, reply)
    try:
        proc = subprocess.run(
            [str(installed_script()), "--home", str(short_home), "hook", "pre-tool-use"],
            input=stdin,
            capture_output=True,
            env=buffered_env(PYTHONIOENCODING="utf-8"),
            timeout=60,
            check=False,
        )
    finally:
        stand_in.close()
    assert [request.stdin for request in stand_in.requests] == [stdin]
    request = stand_in.requests[0]
    assert request.argv == [b"--home", os.fsencode(short_home), b"hook", b"pre-tool-use"]
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        3,
        "{}\né ✓\n".encode(),
        b"a note, unterminated",
    )


@pytest.mark.parametrize(("code", "status"), [(0, 0), (70, 70), (300, 300 & 0xFF), (-1, 255)])
def test_a_served_exit_code_is_the_commands(short_home: Path, code: int, status: int):
    """The exit status is what `sys.exit(code)` would give, in and out of 0..255."""
    stand_in = StandInServer(short_home, Reply(STATUS_OK, code, [(1, "out\n")]))
    try:
        proc = subprocess.run(
            [str(installed_script()), "--home", str(short_home), "verdict", "1"],
            capture_output=True,
            env=buffered_env(),
            timeout=60,
            check=False,
        )
    finally:
        stand_in.close()
    assert (proc.returncode, proc.stdout, proc.stderr) == (status, b"out\n", b"")
