"""The real Claude Code in a project whose own settings send its calls elsewhere.

``hook install`` refuses rather than report a gate Claude Code would not use;
``hook status`` says where the calls go, and the real CLI's calls go there:
to the other upstream first, through the gateway once ``--force`` replaced
the project's base URL. The fake providers' own logs are the proof.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents_cli import clis
from tests.agents_cli.conftest import need
from tests.agents_cli.harness import account, ledger
from tests.agents_cli.test_claude_code import MODEL, PROMPT, RELEASES, claude_env
from tests.conftest import clean_env
from tests.gateway.helpers import NOW, Proxy, Upstream, start_upstream

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def elsewhere() -> Iterator[Upstream]:
    """Another Anthropic-compatible upstream: where the project's settings point."""
    server = start_upstream(agent=True)
    yield server
    server.stop()


def _status(home: Path, cli_home: Path, project: Path) -> tuple[int, dict[str, Any]]:
    done = ledger(home, "hook", "status", str(project), env=_env(cli_home))
    return done.returncode, json.loads(done.stdout)


def _env(cli_home: Path) -> dict[str, str]:
    # The user's settings are the CLI's; no machine policy folder is read.
    return clean_env(
        LEDGER_NOW=NOW, HOME=str(cli_home),
        CLAUDE_CODE_MANAGED_SETTINGS_PATH=str(cli_home / "no-policy"),
    )  # fmt: skip


def _session(cli_home: Path, project: Path) -> clis.Run:
    env = claude_env(cli_home, None, CLAUDE_CODE_MANAGED_SETTINGS_PATH=str(cli_home / "no-policy"))
    return clis.run(
        need(RELEASES[0]),
        ["-p", PROMPT, "--output-format", "json", "--model", MODEL, "--max-turns", "2",
         "--dangerously-skip-permissions"],
        env, cwd=project,
    )  # fmt: skip


def test_the_gate_hook_install_reports_is_where_claude_codes_calls_go(
    cap_home: Path, gateway: Proxy, upstream: Upstream, elsewhere: Upstream, cli_home: Path
) -> None:
    project = cli_home / "work"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": elsewhere.url}}))
    install = ("hook", "install", "--project", str(project), "--gateway", gateway.url)

    refused = ledger(cap_home, *install, env=_env(cli_home))
    assert refused.returncode == 78, refused.stderr
    assert str(settings) in refused.stderr
    assert "env.ANTHROPIC_BASE_URL" in refused.stderr
    code, shown = _status(cap_home, cli_home, project)
    assert (code, shown["gateway_url"], shown["gateway_url_from"]) == (
        1, elsewhere.url, str(settings))  # fmt: skip

    _session(cli_home, project)
    # Where status said: the other upstream, and nothing through the gateway.
    assert elsewhere.calls()
    assert upstream.calls() == []

    forced = ledger(cap_home, *install, "--force", env=_env(cli_home))
    assert forced.returncode == 0, forced.stderr
    assert f"replaced env.ANTHROPIC_BASE_URL {elsewhere.url}" in forced.stderr
    code, shown = _status(cap_home, cli_home, project)
    assert (code, shown["gateway_url"], shown["hooks_active"]) == (0, gateway.url, True)

    before = len(elsewhere.calls())
    _session(cli_home, project)
    assert len(elsewhere.calls()) == before
    outcome = account(cap_home, upstream)
    assert outcome.calls == outcome.records > 0
    assert ledger(cap_home, "verify-chain").returncode == 0
