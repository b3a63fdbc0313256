"""``ledger hook install --gateway URL --bedrock`` / ``--vertex --project P --region R``."""

import json
from pathlib import Path
from typing import Any

import pytest

GATEWAY = "http://gateway.internal:8787"


def _install(run_inproc: Any, home: Path, settings: Path, *more: str) -> Any:
    return run_inproc(["--home", str(home), "hook", "install", "--settings", str(settings), *more])


def test_bedrock_mode_writes_the_bedrock_env_beside_the_gateway(
    home: Path, tmp_path: Path, run_inproc: Any
) -> None:
    settings = tmp_path / "settings.json"
    done = _install(run_inproc, home, settings, "--gateway", GATEWAY, "--bedrock",
                    "--region", "eu-west-1")  # fmt: skip
    assert done.code == 0, done.stderr
    env = json.loads(settings.read_text())["env"]
    assert env["CLAUDE_CODE_USE_BEDROCK"] == "1"
    assert env["ANTHROPIC_BEDROCK_BASE_URL"] == f"{GATEWAY}/bedrock"
    assert env["CLAUDE_CODE_SKIP_BEDROCK_AUTH"] == "1"
    assert env["AWS_REGION"] == "eu-west-1"
    assert env["LEDGER_GATEWAY_URL"] == GATEWAY
    assert done.json()["env"]["CLAUDE_CODE_USE_BEDROCK"] == "1"


def test_vertex_mode_takes_the_google_cloud_project_and_region(
    home: Path, tmp_path: Path, run_inproc: Any
) -> None:
    settings = tmp_path / "settings.json"
    done = _install(run_inproc, home, settings, "--gateway", GATEWAY, "--vertex",
                    "--project", "acme-ml", "--region", "us-east5")  # fmt: skip
    assert done.code == 0, done.stderr
    env = json.loads(settings.read_text())["env"]
    assert env["CLAUDE_CODE_USE_VERTEX"] == "1"
    assert env["ANTHROPIC_VERTEX_BASE_URL"] == f"{GATEWAY}/vertex/v1"
    assert env["CLAUDE_CODE_SKIP_VERTEX_AUTH"] == "1"
    assert env["ANTHROPIC_VERTEX_PROJECT_ID"] == "acme-ml"
    assert env["CLOUD_ML_REGION"] == "us-east5"
    assert not (Path("acme-ml") / ".claude").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bedrock"], "give --gateway"),
        (["--gateway", GATEWAY, "--vertex", "--region", "us-east5"], "--vertex needs --project"),
        (["--gateway", GATEWAY, "--bedrock", "--vertex"], "not both"),
        (["--gateway", GATEWAY, "--region", "us-east-1"], "--region goes with"),
    ],
)
def test_a_cloud_mode_missing_what_it_needs_is_a_usage_error_and_writes_nothing(
    home: Path, tmp_path: Path, run_inproc: Any, args: list[str], message: str
) -> None:
    settings = tmp_path / "settings.json"
    done = _install(run_inproc, home, settings, *args)
    assert done.code == 2
    assert done.stderr.startswith("ledger: ")
    assert message in done.stderr
    assert not settings.exists()


@pytest.mark.parametrize(
    ("mode", "variable"),
    [(["--bedrock", "--region", "eu-west-1"], "CLAUDE_CODE_USE_BEDROCK"),
     (["--vertex", "--project", "acme-ml", "--region", "us-east5"], "CLAUDE_CODE_USE_VERTEX")],
)  # fmt: skip
def test_a_cloud_mode_on_a_laptop_takes_the_key_from_the_helper_beside_the_cloud_env(
    tmp_path: Path, run_inproc: Any, mode: list[str], variable: str
) -> None:
    settings = tmp_path / "settings.json"
    done = run_inproc(["hook", "install", "--settings", str(settings), "--gateway", GATEWAY,
                       "--key-env", "LEDGER_KEY", *mode])  # fmt: skip
    assert done.code == 0, done.stderr
    written = json.loads(settings.read_text())
    env = written["env"]
    assert env[variable] == "1"
    assert env.get("AWS_REGION", env.get("CLOUD_ML_REGION")) == mode[-1]
    # Claude Code in a cloud mode sends the helper's key as its Bearer token.
    assert written["apiKeyHelper"] == "printenv LEDGER_KEY"
    assert env["ANTHROPIC_AUTH_TOKEN"] == ""
    assert "--key-env" in written["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
