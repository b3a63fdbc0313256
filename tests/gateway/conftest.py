"""The gateway tests' fixtures: the fake provider, a home configured for it, and `ledger proxy`.

Each is a real process (``tests.gateway.helpers``). A test module that needs
another configuration overrides ``gateway_home`` or ``proxy`` with its own.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.helpers import Proxy, Upstream, start_proxy, start_upstream, write_config


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    """The fake provider, as its own process."""
    server = start_upstream()
    yield server
    server.stop()


@pytest.fixture
def gateway_home(home: Path, upstream: Upstream) -> Path:
    """A home whose ledger.toml has the test prices and sends calls to ``upstream``."""
    write_config(home, upstream.url)
    return home


@pytest.fixture
def proxy(gateway_home: Path) -> Iterator[Proxy]:
    """``ledger proxy`` on a free local port, stopped cleanly after the test."""
    running = start_proxy(gateway_home, "--listen", "127.0.0.1:0")
    yield running
    assert running.stop() == 0, running.lines
