"""The real Claude Code (Bedrock and Vertex modes) and Codex (Azure) on a $1 cap, via the gateway.

The fake clouds verify the gateway's own credential on every call (a SigV4
signature recomputed with botocore, the Vertex token its token server issued,
the Azure api-key) and answer in each cloud's format; the clients hold only a
gateway key.
"""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

import pytest
from genai_prices import Usage, calc_price

from tests.agents_cli import clis
from tests.agents_cli.conftest import need
from tests.agents_cli.harness import CAP_MICROS, ledger
from tests.conftest import clean_env
from tests.fakes import clouds
from tests.gateway.cloud_helpers import Clouds, cloud_home, start_cloud_gateway
from tests.gateway.helpers import NOW, Proxy, chain, records

pytestmark = pytest.mark.timeout(300)
CLAUDE = f"{clis.CLAUDE_CODE}@{clis.CLAUDE_CODE_RELEASES[0]}"
CODEX = f"{clis.CODEX}@0.171.0"
PROMPT = "Check the workspace with the shell, again and again."
# The price table's own source for each cloud's models.
_PRICED_AS = {"bedrock": "aws", "vertex": "google", "azure": "openai"}


@pytest.fixture
def fake() -> Iterator[Clouds]:
    server = Clouds()
    yield server
    server.stop()


def _home(home: Path, fake: Clouds) -> str:
    return cloud_home(home, fake)


def _gateway(home: Path, tmp_path: Path, fake: Clouds) -> Proxy:
    return start_cloud_gateway(home, tmp_path, fake)


def _price(call: dict[str, Any]) -> int:
    provider = call["path"].split("/")[1]
    usage = call["usage"]
    tokens = Usage(input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"])
    price = calc_price(tokens, model_ref=call["model"], provider_id=_PRICED_AS[provider])
    return int((Decimal(price.total_price) * 1_000_000).to_integral_value(rounding=ROUND_CEILING))


def _key(call: dict[str, Any]) -> str:
    """A call's record key: Claude's answers (on Bedrock, Vertex) keep the Anthropic response's."""
    provider = call["path"].split("/")[1]
    return f"{'azure' if provider == 'azure' else 'anthropic'}:{call['id']}"


def _account(home: Path, fake: Clouds) -> tuple[int, int, int]:
    """Every call recorded once at its exact price: (calls, records, micro-USD billed)."""
    calls = fake.get("/_control/calls")["calls"]
    found = records(home)
    for call in calls:
        mine = [r for r in found if r["idempotency_key"] == _key(call)]
        assert len(mine) == 1, (call, found)
        assert mine[0]["actual_micros"] == _price(call), (call, mine[0])
    keyed = {_key(c) for c in calls}
    strays = [r for r in found if r["idempotency_key"] not in keyed and r["actual_micros"]]
    assert not strays, strays
    return (
        len(calls),
        sum(1 for r in found if r["idempotency_key"] in keyed),
        sum(_price(c) for c in calls),
    )


def _claude_env(cli_home: Path, secret: str, **mode: str) -> dict[str, str]:
    return clis.sealed_env(
        cli_home, ANTHROPIC_AUTH_TOKEN=secret, DISABLE_TELEMETRY="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1", IS_SANDBOX="1",
        PYTHONPATH=os.environ.get("PYTHONPATH", ""), LEDGER_NOW=NOW, **mode,
    )  # fmt: skip


def halts(home: Path) -> int:
    """The requests the gateway refused at the cap (402)."""
    return sum(1 for e in chain(home) if e["event_type"] == "budget.halt_100")


def _figures(name: str, calls: int, recorded: int, billed: int, home: Path, fake: Clouds) -> None:
    verified = fake.get("/_control/auth")
    sys.stderr.write(
        f"\n[figures] {name}: {billed * 100 / CAP_MICROS:.1f} % of the $1 cap, {calls} upstream "
        f"calls, {recorded} records, signatures/tokens verified {verified['verified']}, "
        f"refused {verified['refused']}, requests refused at the cap {halts(home)}; "
        f"requests by endpoint {json.dumps(fake.get('/_control/endpoints'))}\n"
    )


def _session_checks(home: Path, fake: Clouds, name: str) -> None:
    calls, recorded, billed = _account(home, fake)
    _figures(name, calls, recorded, billed, home, fake)
    assert calls == recorded > 1
    assert billed <= CAP_MICROS
    assert billed >= CAP_MICROS * 0.9
    assert fake.get("/_control/auth")["refused"] == 0
    # The refusal is final: each client shows it without retrying the call.
    assert halts(home) == 1
    assert ledger(home, "verify-chain").returncode == 0


def test_claude_code_in_bedrock_mode_stops_at_the_cap_every_call_signed_and_recorded_once(
    home: Path, tmp_path: Path, fake: Clouds
) -> None:
    secret = _home(home, fake)
    gateway = _gateway(home, tmp_path, fake)
    cli_home = tmp_path / "cli"
    (cli_home / "work").mkdir(parents=True)
    env = _claude_env(
        cli_home, secret, CLAUDE_CODE_USE_BEDROCK="1", CLAUDE_CODE_SKIP_BEDROCK_AUTH="1",
        ANTHROPIC_BEDROCK_BASE_URL=f"{gateway.url}/bedrock", AWS_REGION="us-east-1",
    )  # fmt: skip
    done = clis.run(
        need(CLAUDE),
        ["-p", PROMPT, "--output-format", "json", "--dangerously-skip-permissions",
         "--model", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"],
        env, cwd=cli_home / "work",
    )  # fmt: skip
    result = json.loads(done.stdout)
    assert result["is_error"] is True, result
    assert "402" in result["result"], result["result"]
    assert "halt-100" in result["result"], result["result"]
    _session_checks(home, fake, "Claude Code (Bedrock mode)")
    assert gateway.stop() == 0, gateway.lines


def test_claude_code_in_vertex_mode_stops_at_the_cap_with_a_refreshed_token_on_every_call(
    home: Path, tmp_path: Path, fake: Clouds
) -> None:
    secret = _home(home, fake)
    gateway = _gateway(home, tmp_path, fake)
    cli_home = tmp_path / "cli"
    (cli_home / "work").mkdir(parents=True)
    env = _claude_env(
        cli_home, secret, CLAUDE_CODE_USE_VERTEX="1", CLAUDE_CODE_SKIP_VERTEX_AUTH="1",
        ANTHROPIC_VERTEX_BASE_URL=f"{gateway.url}/vertex/v1",
        ANTHROPIC_VERTEX_PROJECT_ID="ledger-test", CLOUD_ML_REGION="us-east5",
    )  # fmt: skip
    done = clis.run(
        need(CLAUDE),
        ["-p", PROMPT, "--output-format", "json", "--dangerously-skip-permissions",
         "--model", "claude-sonnet-4-5@20250929"],
        env, cwd=cli_home / "work",
    )  # fmt: skip
    result = json.loads(done.stdout)
    assert result["is_error"] is True, result
    assert "402" in result["result"], result["result"]
    assert "halt-100" in result["result"], result["result"]
    _session_checks(home, fake, "Claude Code (Vertex mode)")
    assert fake.get("/_control/auth")["tokens_issued"] >= 1
    assert clouds.TOKEN not in "\n".join(gateway.lines)
    assert gateway.stop() == 0, gateway.lines


def test_codex_with_an_azure_provider_stops_at_the_cap_with_the_gateways_api_key(
    home: Path, tmp_path: Path, fake: Clouds
) -> None:
    secret = _home(home, fake)
    gateway = _gateway(home, tmp_path, fake)
    cli_home = tmp_path / "cli"
    (cli_home / "work").mkdir(parents=True)
    (cli_home / ".codex").mkdir()
    (cli_home / ".codex" / "config.toml").write_text(
        'model = "prod-gpt5"\nmodel_provider = "azure"\nweb_search = "disabled"\n\n'
        "[model_providers.azure]\n"
        f'name = "Azure via ledger"\nbase_url = "{gateway.url}/azure/openai/v1"\n'
        'wire_api = "responses"\nenv_key = "AZURE_OPENAI_API_KEY"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n"
    )
    env = clis.sealed_env(
        cli_home, AZURE_OPENAI_API_KEY=secret, CODEX_HOME=str(cli_home / ".codex")
    )
    done = clis.run(
        need(CODEX),
        ["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", PROMPT],
        env, cwd=cli_home / "work", timeout=180,
    )  # fmt: skip
    assert done.code != 0, done
    assert "halt-100" in done.stdout + done.stderr, done.stderr[-2000:]
    _session_checks(home, fake, "Codex CLI 0.171.0 (Azure provider)")
    assert gateway.stop() == 0, gateway.lines


def test_hook_install_bedrock_writes_the_settings_and_each_call_still_counts_once(
    home: Path, tmp_path: Path, fake: Clouds
) -> None:
    secret = _home(home, fake)
    gateway = _gateway(home, tmp_path, fake)
    cli_home = tmp_path / "cli"
    (cli_home / "work").mkdir(parents=True)
    settings = cli_home / ".claude" / "settings.json"
    done = ledger(home, "hook", "install", "--settings", str(settings), "--gateway", gateway.url,
                  "--bedrock")  # fmt: skip
    assert done.returncode == 0, done.stderr
    env = json.loads(settings.read_text())["env"]
    assert env["CLAUDE_CODE_USE_BEDROCK"] == "1"
    assert env["ANTHROPIC_BEDROCK_BASE_URL"] == f"{gateway.url}/bedrock"
    assert env["CLAUDE_CODE_SKIP_BEDROCK_AUTH"] == "1"
    assert env["AWS_REGION"] == "us-east-1"  # proxy.bedrock.region
    run = clis.run(
        need(CLAUDE),
        ["-p", PROMPT, "--output-format", "json", "--dangerously-skip-permissions",
         "--model", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"],
        _claude_env(cli_home, secret), cwd=cli_home / "work",
    )  # fmt: skip
    result = json.loads(run.stdout)
    assert result["is_error"] is True, result
    _session_checks(home, fake, "Claude Code (Bedrock mode, hook install)")
    assert gateway.stop() == 0, gateway.lines


@pytest.mark.parametrize(
    ("mode", "model"),
    [(["--bedrock"], "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
     (["--vertex", "--project", "ledger-test", "--region", "us-east5"],
      "claude-sonnet-4-5@20250929")],
    ids=["bedrock", "vertex"],
)  # fmt: skip
def test_a_laptop_in_a_cloud_mode_with_only_the_url_and_a_key_stops_at_the_cap(
    home: Path, tmp_path: Path, fake: Clouds, mode: list[str], model: str
) -> None:
    secret = _home(home, fake)
    gateway = _gateway(home, tmp_path, fake)
    cli_home = tmp_path / "cli"
    (cli_home / "work").mkdir(parents=True)
    settings = cli_home / ".claude" / "settings.json"
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "hook", "install", "--gateway", gateway.url,
         "--key-env", "LEDGER_KEY", *mode, "--settings", str(settings)],
        env=clean_env(HOME=str(cli_home)), cwd=cli_home, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["home"] is None
    # The shell's own token is blanked by the settings; the helper gives the gateway key.
    env = _claude_env(cli_home, "sk-ant-developers-own", LEDGER_KEY=secret)
    run = clis.run(
        need(CLAUDE),
        ["-p", PROMPT, "--output-format", "json", "--dangerously-skip-permissions",
         "--model", model],
        env, cwd=cli_home / "work",
    )  # fmt: skip
    result = json.loads(run.stdout)
    assert result["is_error"] is True, result
    assert "halt-100" in result["result"], result["result"]
    _session_checks(home, fake, f"Claude Code ({mode[0][2:]} mode, laptop with a key)")
    assert {record["key"] for record in records(home)} == {"dev"}
    assert gateway.stop() == 0, gateway.lines
