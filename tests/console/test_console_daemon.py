"""`ledger daemon` serves the console when console.listen is set, and stops it on SIGTERM."""

import re
import signal
from pathlib import Path

import httpx
import pytest

from tests.gateway.test_gateway_daemon import _daemon, _finish, _free_port
from tests.integration.test_daemon import Lines

pytestmark = pytest.mark.timeout(120)


def test_the_daemon_serves_the_console_on_console_listen(home: Path):
    """The daemon's console prints its sign-in link, signs in with it, and stops with the daemon."""
    port = _free_port()
    with (home / "ledger.toml").open("a") as toml:
        toml.write(f'\n[console]\nlisten = "127.0.0.1:{port}"\n')
    proc = _daemon(home)
    lines = Lines(proc.stderr)
    try:
        assert lines.wait_for(f"console on 127.0.0.1:{port}"), lines.lines
        assert lines.wait_for("/console/login?token="), lines.lines
        link = next(re.search(r"(http://\S+token=\S+)", line) for line in lines.lines
                    if "token=" in line)  # fmt: skip
        assert link is not None
        signed_in = httpx.get(link.group(1))
        assert signed_in.status_code == 303
        assert httpx.get(f"http://127.0.0.1:{port}/console/api/overview",
                         cookies=signed_in.cookies).status_code == 200  # fmt: skip
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, lines.lines
    finally:
        _finish(proc)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/console/login")


def test_a_daemon_whose_console_would_listen_publicly_without_tls_does_not_start(home: Path):
    """console.listen beyond loopback without TLS files or behind_proxy: exit 78 first."""
    with (home / "ledger.toml").open("a") as toml:
        toml.write('\n[console]\nlisten = "0.0.0.0:8788"\n')
    proc = _daemon(home)
    try:
        assert proc.wait(timeout=60) == 78
        assert proc.stderr is not None
        assert proc.stderr.read().startswith("ledger: console.listen: 0.0.0.0:8788")
    finally:
        _finish(proc)
