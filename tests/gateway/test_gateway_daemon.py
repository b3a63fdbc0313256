"""`ledger daemon` serves the gateway when proxy.listen is set, and stops it on SIGTERM."""

import os
import signal
import socket
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

import httpx
import pytest

from tests.conftest import clean_env
from tests.gateway.helpers import (
    ANTHROPIC_HEADERS,
    Upstream,
    anthropic_body,
    records,
    write_config,
)
from tests.integration.test_daemon import Lines

pytestmark = pytest.mark.timeout(120)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _daemon(home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "daemon", "--no-serve"],
        env=clean_env(),  # the daemon runs on the real clock only
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _finish(proc: subprocess.Popen[str]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.stderr is not None
    proc.stderr.close()


def test_the_daemon_serves_the_gateway_on_proxy_listen(home: Path, upstream: Upstream):
    """A call through the daemon's gateway is recorded; SIGTERM stops both, exit 0."""
    port = _free_port()
    write_config(home, upstream.url, extra=f'[proxy]\nlisten = "127.0.0.1:{port}"\n')
    proc = _daemon(home)
    lines = Lines(proc.stderr)
    try:
        assert lines.wait_for(f"gateway on 127.0.0.1:{port}"), lines.lines
        assert lines.wait_for("ledger-proxy: listening on"), lines.lines
        response = httpx.post(f"http://127.0.0.1:{port}/v1/messages", content=anthropic_body(),
                              headers=ANTHROPIC_HEADERS)  # fmt: skip
        assert response.status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, lines.lines
        assert lines.wait_for("ledger-proxy: stopped after"), lines.lines
    finally:
        _finish(proc)
    (record,) = records(home)
    assert record["actual_micros"] == 13500


def test_a_daemon_whose_gateway_would_listen_publicly_does_not_start(home: Path, upstream):
    """proxy.listen on a non-loopback address without gateway keys: exit 78 before anything."""
    write_config(home, upstream.url, extra='[proxy]\nlisten = "0.0.0.0:8787"\n')
    proc = _daemon(home)
    try:
        assert proc.wait(timeout=60) == 78
        assert proc.stderr is not None
        assert proc.stderr.read().startswith("ledger: proxy.listen: 0.0.0.0:8787")
    finally:
        _finish(proc)
