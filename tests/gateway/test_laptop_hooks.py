"""A developer's laptop with no ledger home: `hook install --gateway URL --key-env VAR`.

A real `ledger proxy` with gateway keys holds the budget; the "laptop" is a
directory with no home in it, whose hooks and status line ask the gateway's
`/v1/ledger/me` with the key from the environment, and refuse when they cannot.
"""

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import clean_env, run_process
from tests.gateway.helpers import NOW, Proxy, Upstream, anthropic_body, start_proxy, write_config

pytestmark = pytest.mark.timeout(120)
KEYED = "\n[proxy]\nrequire_keys = true\n"
SPENT = '\n[[budgets]]\nname = "devs"\nusd = 0\nperiod = "day"\nper = "key"\n'
PRE_TOOL_USE = {
    "hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Bash",
    "tool_input": {"command": "ls"}, "cwd": "/tmp",
}  # fmt: skip


@pytest.fixture
def gateway(home: Path, upstream: Upstream) -> Iterator[tuple[Proxy, str]]:
    write_config(home, upstream.url, extra=KEYED)
    issued = run_process(["--home", str(home), "keys", "issue", "dev"], clean_env(LEDGER_NOW=NOW))
    assert issued.code == 0, issued.stderr
    env = clean_env(LEDGER_NOW=NOW, ANTHROPIC_API_KEY="sk-ant-gateway")
    running = start_proxy(home, "--listen", "127.0.0.1:0", env=env)
    yield running, issued.json()["key"]
    running.stop()


@pytest.fixture
def laptop(tmp_path: Path) -> Path:
    """The developer's HOME: no ledger home anywhere in it."""
    path = tmp_path / "laptop"
    path.mkdir()
    return path


def laptop_env(laptop: Path, **extra: str) -> dict[str, str]:
    return clean_env(HOME=str(laptop), LEDGER_NOW=NOW, **extra)


def install(laptop: Path, url: str, **env: str) -> dict[str, Any]:
    settings = laptop / ".claude" / "settings.json"
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "hook", "install", "--gateway", url, "--key-env", "LK",
         "--settings", str(settings)],
        env=laptop_env(laptop, **env), cwd=laptop, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written: dict[str, Any] = json.loads(settings.read_text())
    return written


def run_command(
    command: str, laptop: Path, stdin: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        shlex.split(command), input=stdin, env=laptop_env(laptop, **env), cwd=laptop,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def pre_tool_use(settings: dict[str, Any], laptop: Path, **env: str) -> dict[str, Any]:
    command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    done = run_command(command, laptop, json.dumps(PRE_TOOL_USE), **env)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def denial(answer: dict[str, Any]) -> str:
    output = answer["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny", answer
    return str(output["permissionDecisionReason"])


def test_install_writes_the_gateway_and_a_key_helper_never_the_secret(gateway, laptop):
    proxy, secret = gateway

    settings = install(laptop, proxy.url, LK=secret)

    assert settings["apiKeyHelper"] == "printenv LK"
    assert settings["env"]["ANTHROPIC_BASE_URL"] == proxy.url
    # The developer's own provider keys are never sent to the gateway.
    assert settings["env"]["ANTHROPIC_API_KEY"] == ""
    assert secret not in (laptop / ".claude" / "settings.json").read_text()
    for event in ("PreToolUse", "PostToolUse", "Stop", "UserPromptSubmit", "SessionEnd"):
        command = settings["hooks"][event][0]["hooks"][0]["command"]
        assert command.endswith(f"--gateway {proxy.url} --key-env LK"), command
        assert "--home" not in command
    assert "--gateway" in settings["statusLine"]["command"]
    # Nothing but Claude Code's settings on the laptop: no home was made.
    assert sorted(p.name for p in laptop.iterdir()) == [".claude"]
    # Installing twice changes nothing.
    assert install(laptop, proxy.url, LK=secret) == settings
    # `hook status` needs no home either: the settings say which gateway gates it.
    project = laptop / "src"
    project.mkdir()
    status = subprocess.run(
        [sys.executable, "-m", "ledger", "hook", "status", str(project)],
        env=laptop_env(laptop, CLAUDE_CODE_MANAGED_SETTINGS_PATH=str(laptop / "no-policy")),
        cwd=laptop, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert status.returncode == 0, status.stdout + status.stderr
    shown = json.loads(status.stdout)
    assert (shown["gated"], shown["gateway_url"]) == (True, proxy.url)


def test_hooks_and_statusline_ask_the_gateway_for_the_keys_figures(gateway, laptop, upstream):
    proxy, secret = gateway
    settings = install(laptop, proxy.url, LK=secret)
    spent = httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(),
                       headers={"anthropic-version": "2023-06-01", "x-api-key": secret})  # fmt: skip
    assert spent.status_code == 200, spent.text

    assert pre_tool_use(settings, laptop, LK=secret) == {}
    line = run_command(settings["statusLine"]["command"], laptop, "{}", LK=secret)

    assert line.returncode == 0, line.stderr
    assert line.stdout.startswith("ledger · dev · today $0.01 · $99.98 left of aggregate"), line
    assert "resets" in line.stdout


def test_a_spent_key_stops_the_session_and_says_what_lifts_it(gateway, laptop, home, upstream):
    proxy, secret = gateway
    settings = install(laptop, proxy.url, LK=secret)
    write_config(home, upstream.url, extra=KEYED + SPENT)
    answer = pre_tool_use(settings, laptop, LK=secret)

    assert answer["continue"] is False, answer
    assert "budget:devs is spent for gateway key dev" in answer["stopReason"]
    assert "resets at 2026-06-02T00:00:00" in answer["stopReason"]


@pytest.mark.parametrize(
    ("key", "said"),
    [
        (None, "$LK is not set, so this session has no gateway key: export the gateway key"),
        ("lk_" + "0" * 43, "the gateway refused the key (401"),
    ],
)
def test_no_usable_key_refuses_and_names_the_fix(gateway, laptop, key, said):
    proxy, secret = gateway
    settings = install(laptop, proxy.url, LK=secret)
    env = {} if key is None else {"LK": key}

    reason = denial(pre_tool_use(settings, laptop, **env))

    assert said in reason
    assert "(fail-closed)" in reason


def test_a_gateway_that_cannot_be_reached_refuses(gateway, laptop):
    proxy, secret = gateway
    settings = install(laptop, proxy.url, LK=secret)
    proxy.stop()

    reason = denial(pre_tool_use(settings, laptop, LK=secret))
    line = run_command(settings["statusLine"]["command"], laptop, "{}", LK=secret)

    assert f"the gateway {proxy.url} cannot be reached" in reason
    assert "tool call refused (fail-closed)" in reason
    assert line.stdout.startswith("ledger · spend unknown: the gateway"), line


def test_key_env_needs_a_gateway_and_a_variable_name(laptop):
    for args, said in [
        (["--key-env", "LK"], "--key-env goes with --gateway URL"),
        (["--gateway", "http://127.0.0.1:9", "--key-env", "not a name"], "not an environment"),
    ]:
        done = run_process(["hook", "install", *args, "--settings", str(laptop / "s.json")],
                           laptop_env(laptop))  # fmt: skip
        assert done.code == 2, done.stderr
        assert said in done.stderr
