"""Fixtures for the real agent CLIs: the fake provider in agent mode, a $1 home, its gateway."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents_cli import clis
from tests.agents_cli.harness import write_home_config
from tests.gateway.helpers import Proxy, Upstream, start_proxy, start_upstream


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = start_upstream(agent=True)
    yield server
    server.stop()


@pytest.fixture
def cap_home(home: Path, upstream: Upstream) -> Path:
    write_home_config(home, upstream)
    return home


@pytest.fixture
def gateway(cap_home: Path) -> Iterator[Proxy]:
    running = start_proxy(cap_home, "--listen", "127.0.0.1:0")
    yield running
    assert running.stop() == 0, running.lines


@pytest.fixture
def cli_home(tmp_path: Path) -> Path:
    """The CLI's HOME, a fresh directory, and a workspace inside it."""
    path = tmp_path / "cli-home"
    (path / "work").mkdir(parents=True)
    return path


def need(spec: str) -> Path:
    """The CLI's executable; the test skips only when npm is absent."""
    try:
        return clis.installed(spec)
    except clis.UnavailableError as exc:
        if "npm is not installed" in str(exc):
            pytest.skip(str(exc))
        raise
