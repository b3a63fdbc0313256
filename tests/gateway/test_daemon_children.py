"""The children of `ledger daemon` end with it, `kill -9` included; a taken port is named, 75."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import clean_env, run_process
from tests.gateway.helpers import Upstream, write_config
from tests.gateway.test_gateway_daemon import _finish, _free_port
from tests.integration.test_daemon import Lines

pytestmark = pytest.mark.timeout(120)


def _daemon(home: Path, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "daemon", *options],
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    living = []
    for proc in processes:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                living.append(proc)
        except psutil.NoSuchProcess:
            pass
    return living


def test_kill_9_of_the_daemon_leaves_no_child_running(home: Path, upstream: Upstream):
    port = _free_port()
    write_config(home, upstream.url, extra=f'[proxy]\nlisten = "127.0.0.1:{port}"\n')
    proc = _daemon(home)
    lines = Lines(proc.stderr)
    children: list[psutil.Process] = []
    try:
        assert lines.wait_for("ledger-proxy: listening on"), lines.lines
        children = psutil.Process(proc.pid).children(recursive=True)
        commands = [" ".join(child.cmdline()) for child in children]
        assert any(command.endswith(" serve") for command in commands), commands
        assert any(command.endswith(" proxy") for command in commands), commands
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while _alive(children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(children), [" ".join(p.cmdline()) for p in _alive(children)]
    finally:
        for child in _alive(children):
            child.kill()
        _finish(proc)


def test_two_daemons_on_one_port_the_second_names_the_first_and_exits_75(
    home: Path, upstream: Upstream, tmp_path: Path
):
    port = _free_port()
    listen = f'[proxy]\nlisten = "127.0.0.1:{port}"\n'
    write_config(home, upstream.url, extra=listen)
    other = tmp_path / "other"
    assert (
        run_process(["--home", str(other), "init", "--daily-cap-usd", "5"], clean_env()).code == 0
    )
    write_config(other, upstream.url, extra=listen)
    first = _daemon(home, "--no-serve")
    lines = Lines(first.stderr)
    try:
        assert lines.wait_for("ledger-proxy: listening on"), lines.lines
        (holder,) = [
            child.pid
            for child in psutil.Process(first.pid).children(recursive=True)
            if child.cmdline()[-1:] == ["proxy"]
        ]
        second = _daemon(other, "--no-serve")
        try:
            assert second.wait(timeout=60) == 75
            assert second.stderr is not None
            err = second.stderr.read()
        finally:
            _finish(second)
        (line,) = [text for text in err.splitlines() if text.startswith("ledger:")]
        assert f"127.0.0.1:{port}" in line
        assert "address already in use" in line
        assert f"pid {holder} (" in line
        assert "proxy.listen" in line
        # The gateway alone, on the same port: the same refusal, never a retry loop.
        alone = run_process(["--home", str(other), "proxy"], clean_env())
        assert alone.code == 75
        assert f"pid {holder} (" in alone.stderr
    finally:
        _finish(first)
