"""`ledger serve` as a process: SIGTERM drain, stale and frozen servers, peers, changes (SPEC §9)."""

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ledger.server.protocol import (
    HEADER_SIZE,
    REPLY_MAGIC,
    STATUS_OK,
    STATUS_REFUSED,
    Reply,
    Request,
    body_length,
)
from tests.conftest import clean_env
from tests.integration.server_helpers import (
    NOW,
    entries,
    init_home,
    kill_quietly,
    ledger,
    start_server,
    wait_for_socket,
)

pytestmark = pytest.mark.timeout(300)


def raw_request(home: Path, *args: str, request_id: str = "rq-test", **env: str) -> Request:
    """A request as the client would build it, for `ledger --home HOME ARGS`."""
    environ = clean_env(LEDGER_NOW=NOW, **env)
    return Request(
        request_id,
        os.fsencode(Path.cwd()),
        [os.fsencode(a) for a in ("--home", str(home), *args)],
        [f"{k}={v}".encode() for k, v in environ.items()],
        columns=80,
    )


def read_reply(sock: socket.socket) -> Reply:
    data = b""
    while len(data) < HEADER_SIZE:
        chunk = sock.recv(65536)
        assert chunk, "connection closed before the reply"
        data += chunk
    size = body_length(data[:HEADER_SIZE], REPLY_MAGIC, 1 << 24)
    while len(data) < HEADER_SIZE + size:
        chunk = sock.recv(65536)
        assert chunk, "connection closed mid-reply"
        data += chunk
    return Reply.decode(data[HEADER_SIZE : HEADER_SIZE + size])


def connect(home: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(60)
    sock.connect(str(home / "gate.sock"))
    return sock


def test_the_socket_is_private_and_removed_on_sigterm(tmp_path: Path):
    """gate.sock is mode 0600 while served; SIGTERM exits 0 and removes it."""
    home = init_home(tmp_path / "home")
    server = start_server(home)
    mode = (home / "gate.sock").stat().st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600
    assert server.stop() == 0
    assert not (home / "gate.sock").exists()
    assert ledger(home, "verdict", "1").code == 0  # in-process now


def test_sigterm_drains_every_accepted_request(tmp_path: Path):
    """Requests sent before SIGTERM, and one still arriving, are all answered; exit 0."""
    home = init_home(tmp_path / "home")
    server = start_server(home)
    before = len(entries(home))
    complete = []
    for index in range(5):
        sock = connect(home)
        sock.sendall(raw_request(home, "verdict", "0.01", request_id=f"rq-{index}").encode())
        complete.append(sock)
    partial = connect(home)
    data = raw_request(home, "verdict", "0.01", request_id="rq-partial").encode()
    partial.sendall(data[: len(data) // 2])
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for("stopping")
    partial.sendall(data[len(data) // 2 :])
    replies = [read_reply(sock) for sock in [*complete, partial]]
    for sock in [*complete, partial]:
        sock.close()
    assert server.wait() == 0
    assert [(r.status, r.code) for r in replies] == [(STATUS_OK, 0)] * 6
    assert len(entries(home)) == before + 6
    assert not (home / "gate.sock").exists()


def test_a_repeated_request_id_gets_the_same_reply_and_writes_once(tmp_path: Path):
    """The server is idempotent by request id."""
    home = init_home(tmp_path / "home")
    server = start_server(home)
    try:
        frame = raw_request(home, "verdict", "2", request_id="rq-same").encode()
        answers = []
        for _ in range(2):
            with connect(home) as sock:
                sock.sendall(frame)
                answers.append(read_reply(sock))
    finally:
        assert server.stop() == 0
    assert answers[0].writes == answers[1].writes
    assert answers[0].code == answers[1].code == 0
    assert [e["event_type"] for e in entries(home)].count("budget.allow") == 1


def test_a_stale_socket_from_a_killed_server_neither_hangs_nor_misleads(tmp_path: Path):
    """After SIGKILL the socket file stays: clients run in-process; a new server replaces it."""
    home = init_home(tmp_path / "home")
    server = start_server(home)
    kill_quietly(server)
    assert (home / "gate.sock").exists()
    result = ledger(home, "verdict", "1", timeout=60)
    assert result.code == 0, result.stderr
    assert result.json()["verdict"] == "allow"
    assert len(entries(home)) == 1
    again = start_server(home)
    try:
        assert ledger(home, "verdict", "1").code == 0
    finally:
        assert again.stop() == 0
    assert again.served_count() == 1
    assert len(entries(home)) == 2


def test_a_frozen_server_costs_one_timeout_and_the_retry_never_counts_twice(tmp_path: Path):
    """A stopped server: the client waits LEDGER_SERVER_TIMEOUT, records in-process with
    the request id as key; when the server wakes, it finds the record already there."""
    home = init_home(tmp_path / "home")
    server = start_server(home)
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        env = clean_env(LEDGER_NOW=NOW, LEDGER_SERVER_TIMEOUT="1")
        result = ledger(home, "record", "0.5", "--provider", "openai", env=env)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert result.code == 0, result.stderr
    document = result.json()
    assert document["duplicate"] is False
    assert document["idempotency_key"] is None
    assert server.stop() == 0
    assert server.served_count() == 1  # the server did decide it, after waking
    records = [e for e in entries(home) if e["event_type"] == "budget.record_call"]
    assert len(records) == 1
    assert records[0]["payload"]["idempotency_key"].startswith("rq-")


def test_a_lost_servers_retry_prints_the_first_result(tmp_path: Path):
    """A record the server sealed whose reply was lost: the in-process retry with the
    same request id writes nothing and prints the first result as it was."""
    home = init_home(tmp_path / "home")
    server = start_server(home)
    request = raw_request(home, "record", "0.75", "--provider", "openai", request_id="rq-lost")
    try:
        with connect(home) as sock:
            sock.sendall(request.encode())
            first = read_reply(sock)
    finally:
        assert server.stop() == 0
    code = (
        "import sys\n"
        "from ledger.cli.client import answer_here\n"
        "from ledger.server.protocol import Request\n"
        "request = Request.decode(sys.stdin.buffer.read()[8:])\n"
        "sys.exit(answer_here(request, retry=True))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=request.encode(),
        capture_output=True,
        env=clean_env(LEDGER_NOW=NOW),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    retried = json.loads(proc.stdout)
    sealed = json.loads(first.writes[0][1])
    assert sealed["duplicate"] is False
    assert retried == sealed
    assert retried["idempotency_key"] is None
    assert [e["event_type"] for e in entries(home)].count("budget.record_call") == 1


def test_a_second_server_for_the_same_home_exits_75(tmp_path: Path):
    """One server per home: gate.lock is held for the server's lifetime."""
    home = init_home(tmp_path / "home")
    server = start_server(home)
    try:
        second = ledger(home, "serve", env=clean_env(), timeout=60)
    finally:
        assert server.stop() == 0
    assert second.code == 75
    assert "another `ledger serve`" in second.stderr


def test_config_and_key_changes_apply_to_the_next_request(tmp_path: Path):
    """An edited ledger.toml and a rotated key are in effect for the next request."""
    home = init_home(tmp_path / "home")
    server = start_server(home)
    try:
        assert ledger(home, "verdict", "1").json()["verdict"] == "allow"
        config = home / "ledger.toml"
        config.write_text(config.read_text().replace("daily_cap = 100", "daily_cap = 1"))
        halted = ledger(home, "verdict", "1")
        assert halted.code == 1
        assert halted.json()["daily_cap_usd"] == 1.0
        rotated = ledger(home, "keys", "rotate", env=clean_env(LEDGER_NOW=NOW))
        assert rotated.code == 0, rotated.stderr
        new_key = json.loads(rotated.stdout)["new_key_id"]
        assert ledger(home, "usage").code == 0
        ledger(home, "verdict", "0.5")
    finally:
        assert server.stop() == 0
    assert server.served_count() == 4
    assert entries(home)[-1]["signing_key_id"] == new_key
    assert ledger(home, "verify-chain", env=clean_env()).code == 0


def _peer_home() -> Path:
    # Under a directory another uid may traverse (pytest's tmp_path is 0700).
    base = Path(tempfile.mkdtemp(prefix="ledger-peer-"))
    base.chmod(0o711)
    return base


def test_a_peer_of_another_uid_is_refused(tmp_path: Path):
    """A process that setuid()s to nobody and connects is refused (SO_PEERCRED); nothing runs."""
    if os.geteuid() != 0:
        pytest.skip("needs root to setuid() a child to nobody")
    base = _peer_home()
    home = init_home(base / "home")
    home.chmod(0o711)
    server = start_server(home)
    try:
        (home / "gate.sock").chmod(0o666)  # so the kernel lets nobody connect at all
        frame = raw_request(home, "verdict", "1", request_id="rq-peer").encode()
        pid = os.fork()
        if pid == 0:  # the child: nobody, then connect
            status = 9
            try:
                os.setgid(65534)
                os.setuid(65534)
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(30)
                    sock.connect(str(home / "gate.sock"))
                    try:
                        sock.sendall(frame)
                    except OSError:
                        pass
                    status = 0 if read_reply(sock).status == STATUS_REFUSED else 3
            except BaseException:
                status = 4
            finally:
                os._exit(status)
        _pid, raw = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(raw) == 0
        server.wait_for("refused a peer of uid 65534")
        assert ledger(home, "verdict", "1").code == 0  # our own uid is still served
        assert server.stop() == 0
        assert server.served_count() == 1
        assert [e["event_type"] for e in entries(home)].count("budget.allow") == 1
    finally:
        kill_quietly(server)
        shutil.rmtree(base, ignore_errors=True)


def test_the_front_door_imports_nothing_heavy_when_the_server_answers(tmp_path: Path):
    """No cryptography, argparse, json or services in a served call (python -X importtime)."""
    home = init_home(tmp_path / "home")
    code = "from ledger.cli import main; main()"
    argv = [sys.executable, "-X", "importtime", "-c", code, "--home", str(home), "verdict", "1"]
    heavy = {"cryptography", "argparse", "json", "typing", "pathlib", "ledger.cli.percall.parser",
             "ledger.services", "ledger.runtime", "ledger.core", "ledger.edges"}  # fmt: skip

    def imported(env: dict[str, str]) -> tuple[set[str], dict[str, Any]]:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        assert proc.returncode == 0, proc.stderr
        names = set()
        for line in proc.stderr.splitlines():
            if line.startswith("import time:") and "|" in line:
                name = line.rsplit("|", 1)[1].strip()
                names.update({name, name.split(".")[0], ".".join(name.split(".")[:2])})
        return names, json.loads(proc.stdout)

    server = start_server(home)
    try:
        served, document = imported(clean_env(LEDGER_NOW=NOW))
    finally:
        assert server.stop() == 0
    assert server.served_count() == 1
    assert document["verdict"] == "allow"
    assert not served & heavy, served & heavy
    in_process, _ = imported(clean_env(LEDGER_NOW=NOW))
    assert {"cryptography", "argparse"} <= in_process  # the check itself can see them


def test_the_daemon_serves_unless_told_not_to(tmp_path: Path):
    """`ledger daemon` runs the server for its home; `--no-serve` does not."""
    home = init_home(tmp_path / "home")
    env = clean_env()
    for no_serve in (False, True):
        args = ["--no-serve"] if no_serve else []
        daemon = subprocess.Popen(
            [sys.executable, "-m", "ledger", "--home", str(home), "daemon", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        from tests.integration.server_helpers import Server

        watched = Server(daemon, home).watch()
        try:
            watched.wait_for("started:", timeout=60)
            if no_serve:
                assert "not serving" in watched.wait_for("started:")
                assert not (home / "gate.sock").exists()
            else:
                wait_for_socket(home / "gate.sock", timeout=60)
                result = ledger(home, "record", "0.01", "--provider", "openai", env=clean_env())
                assert result.code == 0, result.stderr
                keys = [e["payload"].get("idempotency_key") for e in entries(home)]
                assert str(keys[-1]).startswith("rq-")  # the server sealed it
        finally:
            assert watched.stop() == 0
        assert not (home / "gate.sock").exists()


def test_something_else_at_gate_sock_is_never_removed(tmp_path: Path):
    """A directory where the socket goes: the server refuses to start (74), touching nothing."""
    home = init_home(tmp_path / "home")
    (home / "gate.sock").mkdir()
    (home / "gate.sock" / "keep").write_text("mine")
    result = ledger(home, "serve", env=clean_env(), timeout=60)
    assert result.code == 74
    assert "in the way" in result.stderr
    assert (home / "gate.sock" / "keep").read_text() == "mine"
    assert ledger(home, "verdict", "1").code == 0  # clients run in-process
