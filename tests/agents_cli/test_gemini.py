"""The real Gemini CLI through the gateway on a $1 cap: every call recorded once, the run halted."""

import json
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
from tests.gateway.helpers import Proxy, Upstream

pytestmark = pytest.mark.timeout(300)
SPEC = f"{clis.GEMINI_CLI}@0.61.0"
MODEL = "gemini-2.5-pro"
PROMPT = "Check the workspace with the shell, again and again."
# API-key sign-in chosen, telemetry and usage statistics off, no update check.
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "telemetry": {"enabled": False},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"disableAutoUpdate": True},
}


def gemini_env(cli_home: Path, base_url: str) -> dict[str, str]:
    (cli_home / ".gemini").mkdir()
    (cli_home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
    return clis.sealed_env(
        cli_home,
        GEMINI_API_KEY="fake-gemini-key",
        GOOGLE_GEMINI_BASE_URL=base_url,
        GEMINI_CLI_TRUST_WORKSPACE="true",
        GEMINI_CLI_NO_RELAUNCH="true",
    )


def test_through_the_gateway_gemini_cli_halts_at_the_cap_with_every_call_once(
    cap_home: Path, gateway: Proxy, upstream: Upstream, cli_home: Path
) -> None:
    env = gemini_env(cli_home, gateway.url)

    done = clis.run(need(SPEC), ["-p", PROMPT, "--yolo", "-m", MODEL], env,
                    cwd=cli_home / "work", timeout=180)  # fmt: skip

    assert done.code != 0, done
    outcome = account(cap_home, upstream)
    report("Gemini CLI 0.61.0 gateway only", outcome, gateway)
    assert outcome.calls == outcome.records > 1
    assert outcome.truth_micros <= CAP_MICROS
    assert outcome.halts >= 1
    assert ledger(cap_home, "verify-chain").returncode == 0
    assert outcome.truth_micros >= CAP_MICROS * 0.9


def test_a_402_is_not_retried_and_its_message_is_on_stderr(
    upstream: Upstream, cli_home: Path
) -> None:
    upstream.refuse()

    done = clis.run(need(SPEC), ["-p", PROMPT, "--yolo", "-m", MODEL],
                    gemini_env(cli_home, upstream.url), cwd=cli_home / "work", timeout=180)  # fmt: skip

    assert done.code == 1
    assert "ledger: halt-100" in done.stderr
    assert len([r for r in upstream.requests() if "GenerateContent" in r["path"]]) == 1
