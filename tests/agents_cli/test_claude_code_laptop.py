"""The real Claude Code on a developer's laptop: no ledger home, only the gateway and a key.

The "laptop" is the CLI's HOME with no home in it; `ledger hook install
--gateway URL --key-env LEDGER_KEY` is all its set-up. The gateway (with gateway
keys required and its own provider key) holds the $1 cap: every call the
session makes is gated and recorded under the developer's key, the
developer's own provider key never reaches the gateway, and the hooks ask the
gateway for the key's figures — refusing the prompt when it cannot be reached.
"""

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents_cli.harness import CAP_MICROS, account, ledger, report, write_home_config
from tests.agents_cli.test_claude_code import RELEASES, claude, claude_env
from tests.conftest import clean_env
from tests.gateway.helpers import NOW, Proxy, Upstream, records, start_proxy

pytestmark = pytest.mark.timeout(300)
GATEWAY_PROVIDER_KEY = "sk-ant-gateway-own"


@pytest.fixture
def keyed_gateway(home: Path, upstream: Upstream) -> Iterator[tuple[Proxy, str]]:
    write_home_config(home, upstream, "\n[proxy]\nrequire_keys = true\n")
    issued = ledger(home, "keys", "issue", "dev")
    assert issued.returncode == 0, issued.stderr
    env = clean_env(LEDGER_NOW=NOW, ANTHROPIC_API_KEY=GATEWAY_PROVIDER_KEY)
    running = start_proxy(home, "--listen", "127.0.0.1:0", env=env)
    yield running, json.loads(issued.stdout)["key"]
    running.stop()


def install_on_the_laptop(cli_home: Path, url: str) -> dict[str, Any]:
    settings = cli_home / ".claude" / "settings.json"
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "hook", "install", "--gateway", url,
         "--key-env", "LEDGER_KEY", "--settings", str(settings)],
        env=clean_env(HOME=str(cli_home)), cwd=cli_home, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written: dict[str, Any] = json.loads(done.stdout)
    return written


@pytest.mark.parametrize("spec", RELEASES[:2])
def test_a_laptop_with_only_the_url_and_a_key_stops_at_the_cap(
    spec: str, home: Path, keyed_gateway: tuple[Proxy, str], upstream: Upstream, cli_home: Path
) -> None:
    proxy, secret = keyed_gateway
    written = install_on_the_laptop(cli_home, proxy.url)
    assert written["home"] is None

    # The developer's shell has a provider key of its own, and the gateway key.
    _done, result = claude(spec, cli_home, claude_env(cli_home, None, LEDGER_KEY=secret))

    assert result["is_error"] is True, result
    assert "halt-100" in result["result"], result["result"]
    outcome = account(home, upstream)
    report(f"Claude Code {spec.rsplit('@', 1)[1]} laptop, keyed gateway", outcome, proxy)
    assert outcome.calls == outcome.records > 1
    assert outcome.truth_micros <= CAP_MICROS
    assert outcome.truth_micros >= CAP_MICROS * 0.9
    # Every call under the developer's key; upstream saw the gateway's own key only.
    assert {record["key"] for record in records(home)} == {"dev"}
    sent = {r["headers"].get("x-api-key") for r in upstream.requests()}
    assert sent == {GATEWAY_PROVIDER_KEY}, sent
    assert not (cli_home / ".ledger").exists()
    assert ledger(home, "verify-chain").returncode == 0


def test_a_laptop_whose_gateway_is_down_blocks_the_prompt(
    home: Path, keyed_gateway: tuple[Proxy, str], upstream: Upstream, cli_home: Path
) -> None:
    proxy, secret = keyed_gateway
    install_on_the_laptop(cli_home, proxy.url)
    proxy.stop()

    done, result = claude(RELEASES[0], cli_home, claude_env(cli_home, None, LEDGER_KEY=secret))

    said = json.dumps(result) + done.stderr
    assert f"the gateway {proxy.url} cannot be reached" in said, (done, result)
    assert "prompt blocked (fail-closed)" in said
    assert upstream.calls() == []
