"""The server's reply: sent whole to a reading client, bounded for one that never reads."""

import socket
import threading
import time
from pathlib import Path

import pytest

from ledger.server import loop
from ledger.server.loop import Server


def _server(tmp_path: Path) -> Server:
    def execute(_request: object) -> object:
        raise AssertionError("no request is run here")

    return Server(tmp_path, execute)  # type: ignore[arg-type]


def _pair() -> tuple[socket.socket, socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ours.setblocking(False)  # as every accepted connection is
    return ours, theirs


def test_a_reply_larger_than_the_buffer_arrives_whole(tmp_path):
    """Past the first non-blocking send, the rest follows to a client that reads."""
    ours, theirs = _pair()
    data = bytes(range(256)) * 4096  # 1 MiB, far past the socket's buffer
    received = bytearray()

    def read() -> None:
        while chunk := theirs.recv(65536):
            received.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    _server(tmp_path)._send(ours, data)
    reader.join(timeout=10)
    theirs.close()
    assert bytes(received) == data
    assert ours.fileno() == -1  # closed


def test_a_client_that_never_reads_costs_at_most_the_send_timeout(tmp_path, monkeypatch):
    """The server gives up on a full buffer after SEND_TIMEOUT and closes the socket."""
    monkeypatch.setattr(loop, "SEND_TIMEOUT", 0.3)
    ours, theirs = _pair()
    began = time.monotonic()
    _server(tmp_path)._send(ours, b"x" * (8 << 20))
    assert time.monotonic() - began < 5
    assert ours.fileno() == -1
    theirs.close()


@pytest.mark.parametrize("size", [1, 4096])
def test_a_small_reply_is_sent_at_once(tmp_path, size):
    """A reply that fits is sent by the first send, and the client reads it all."""
    ours, theirs = _pair()
    _server(tmp_path)._send(ours, b"y" * size)
    theirs.settimeout(5)
    received = b""
    while chunk := theirs.recv(65536):
        received += chunk
    theirs.close()
    assert received == b"y" * size
