"""The real Codex CLI through the gateway on a $1 cap: every call recorded once, the run halted."""

import tomllib
from pathlib import Path

import pytest

from tests.agents_cli import clis
from tests.agents_cli.conftest import need
from tests.agents_cli.harness import (
    CAP_MICROS,
    account,
    ledger,
    report,
)
from tests.conftest import REPO
from tests.gateway.helpers import Proxy, Upstream

pytestmark = pytest.mark.timeout(300)
SPEC = f"{clis.CODEX}@0.171.0"
MODEL = "gpt-5"
PROMPT = "Check the workspace with the shell, again and again."


def codex_config(gateway_url: str, *, retries: bool = False) -> str:
    """A model provider that is the gateway, speaking the Responses API, with no retries.

    Codex retries a failed request (a 402 included) up to 4 times and a
    dropped stream up to 5 times by default; 0 of each makes a halt final.
    """
    return (
        f'model = "{MODEL}"\nmodel_provider = "ledger"\nweb_search = "disabled"\n\n'
        "[model_providers.ledger]\n"
        'name = "ledger gateway"\n'
        f'base_url = "{gateway_url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "OPENAI_API_KEY"\n'
        + ("" if retries else "request_max_retries = 0\nstream_max_retries = 0\n")
    )


def test_through_the_gateway_codex_halts_at_the_cap_with_every_call_once(
    cap_home: Path, gateway: Proxy, upstream: Upstream, cli_home: Path
) -> None:
    (cli_home / ".codex").mkdir()
    (cli_home / ".codex" / "config.toml").write_text(codex_config(gateway.url))
    env = clis.sealed_env(cli_home, OPENAI_API_KEY="sk-fake", CODEX_HOME=str(cli_home / ".codex"))

    done = clis.run(
        need(SPEC),
        ["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", PROMPT],
        env, cwd=cli_home / "work", timeout=180,
    )  # fmt: skip

    assert done.code != 0, done
    assert "halt-100" in done.stdout + done.stderr, done.stderr[-2000:]
    outcome = account(cap_home, upstream)
    report("Codex CLI 0.171.0 gateway only", outcome, gateway)
    assert outcome.calls == outcome.records > 1
    assert outcome.truth_micros <= CAP_MICROS
    assert outcome.halts == 1  # no retry after the 402
    assert ledger(cap_home, "verify-chain").returncode == 0
    assert outcome.truth_micros >= CAP_MICROS * 0.9


@pytest.mark.parametrize(("retries", "requests"), [(True, 6), (False, 1)])
def test_a_402_is_retried_five_times_by_default_and_never_with_retries_off(
    upstream: Upstream, cli_home: Path, retries: bool, requests: int
) -> None:
    upstream.refuse()
    (cli_home / ".codex").mkdir()
    (cli_home / ".codex" / "config.toml").write_text(codex_config(upstream.url, retries=retries))
    env = clis.sealed_env(cli_home, OPENAI_API_KEY="sk-fake", CODEX_HOME=str(cli_home / ".codex"))

    done = clis.run(
        need(SPEC),
        ["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", PROMPT],
        env, cwd=cli_home / "work", timeout=180,
    )  # fmt: skip

    assert done.code == 1
    assert "402 Payment Required: ledger: halt-100" in done.stderr
    assert len([r for r in upstream.requests() if r["path"] == "/v1/responses"]) == requests


def test_the_codex_page_shows_the_provider_entry_these_tests_run() -> None:
    """The settings the Codex CLI page tells users to paste are the ones tested here."""
    page = (REPO / "docs" / "integrations" / "codex.md").read_text(encoding="utf-8")
    shown = tomllib.loads(page.split("```toml\n", 1)[1].split("```", 1)[0])
    tested = tomllib.loads(codex_config("http://127.0.0.1:8787"))
    for config in (shown, tested):
        del config["model_providers"]["ledger"]["name"]  # a label Codex shows, nothing more
    assert shown == tested
