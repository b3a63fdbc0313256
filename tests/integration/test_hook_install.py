"""``ledger hook install``: the installed ``ledger`` writes its hooks into settings files."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.claude_helpers import ENV, PRICES, assistant, hook_input, tool_result
from tests.integration.test_agent_helpers import cli, process_env
from tests.integration.test_launcher import installed_script

EVENTS = {"PreToolUse": "pre-tool-use", "PostToolUse": "post-tool-use", "Stop": "stop",
          "UserPromptSubmit": "user-prompt-submit", "SessionEnd": "session-end"}  # fmt: skip
THEIRS = {
    "model": "opus",
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def install(home: Path, *args: str, cwd: Path, env_home: Path) -> subprocess.CompletedProcess[str]:
    """The installed ``ledger`` script, run by relative --home from ``cwd``."""
    return subprocess.run(
        [str(installed_script()), "--home", str(home), "hook", "install", *args],
        capture_output=True, text=True, cwd=cwd, timeout=120, check=False,
        env=process_env(HOME=str(env_home), LEDGER_NO_SERVER="1"),
    )  # fmt: skip


@pytest.fixture
def workdir(tmp_path, run_inproc):
    home = tmp_path / "work" / "home"
    assert cli(run_inproc, home, "init", "--daily-cap-usd", "10").code == 0
    (home / "ledger.toml").write_text((home / "ledger.toml").read_text() + PRICES)
    return tmp_path / "work"


def commands(settings: dict[str, Any], event: str) -> list[str]:
    return [hook["command"] for group in settings["hooks"][event] for hook in group["hooks"]]


def test_install_merges_with_absolute_paths_and_twice_changes_nothing(workdir, tmp_path):
    target = tmp_path / "settings.json"
    target.write_text(json.dumps(THEIRS))
    first = install(Path("home"), "--settings", str(target), cwd=workdir, env_home=tmp_path)
    assert first.returncode == 0, first.stderr
    printed = json.loads(first.stdout)
    home = (workdir / "home").resolve()
    launcher = str(installed_script().absolute())
    assert printed["settings"] == str(target)
    assert printed["changed"] is True
    assert printed["home"] == str(home)
    settings = json.loads(target.read_text())
    assert settings["model"] == "opus"
    assert commands(settings, "Notification") == ["notify-send done"]
    assert commands(settings, "PreToolUse")[0] == "lint.sh"
    for event, action in EVENTS.items():
        expected = f"{launcher} --home {home} hook {action}"
        assert printed["hooks"][event] == expected
        assert commands(settings, event)[-1] == expected
        assert commands(settings, event).count(expected) == 1
    written = target.read_bytes()
    again = install(Path("home"), "--settings", str(target), cwd=workdir, env_home=tmp_path)
    assert json.loads(again.stdout)["changed"] is False
    assert target.read_bytes() == written


def test_the_installed_hooks_run_without_ledger_on_the_path_from_anywhere(workdir, tmp_path):
    install(Path("home"), "--project", str(tmp_path / "app"), cwd=workdir, env_home=tmp_path)
    settings = json.loads((tmp_path / "app" / ".claude" / "settings.json").read_text())
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(b"")
    with transcript.open("ab") as handle:
        for line in (assistant("msg_01A", 10), tool_result()):
            handle.write(json.dumps(line).encode() + b"\n")
    for event in EVENTS:
        [command] = commands(settings, event)
        proc = subprocess.run(
            ["/bin/sh", "-c", command], input=hook_input(event, transcript),
            capture_output=True, text=True, cwd="/", timeout=120, check=False,
            env=process_env(PATH="/nonexistent", **ENV),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        answer = json.loads(proc.stdout)
        assert "decision" not in answer
        assert answer.get("continue", True) is True


def test_the_default_is_the_users_settings_and_an_old_ledger_hook_is_replaced(workdir, tmp_path):
    user = tmp_path / "user"
    target = user / ".claude" / "settings.json"
    target.parent.mkdir(parents=True)
    old = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "ledger hook stop"}]}]}}
    target.write_text(json.dumps(old))
    proc = install(Path("home"), cwd=workdir, env_home=user)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["replaced"] == ["ledger hook stop"]
    settings = json.loads(target.read_text())
    assert [command.split()[-1] for command in commands(settings, "Stop")] == ["stop"]
    assert commands(settings, "Stop")[0].startswith("/")


@pytest.mark.parametrize("problem", ["no home", "not json", "hooks not an object"])
def test_nothing_is_written_when_it_cannot_be_done_right(workdir, tmp_path, problem):
    target = tmp_path / "settings.json"
    content = {"not json": "{oops", "hooks not an object": '{"hooks": []}'}.get(problem, "{}")
    target.write_text(content)
    home = Path("hmoe") if problem == "no home" else Path("home")
    proc = install(home, "--settings", str(target), cwd=workdir, env_home=tmp_path)
    assert proc.returncode == (78 if problem == "no home" else 65)
    assert proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("ledger: ")
    assert target.read_text() == content
    assert not (workdir / "hmoe").exists()


def test_run_as_a_module_the_hooks_run_the_same_interpreter(workdir, tmp_path):
    target = tmp_path / "settings.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", "home", "hook", "install", "--settings",
         str(target)], capture_output=True, text=True, cwd=workdir, timeout=120, check=False,
        env=process_env(HOME=str(tmp_path), LEDGER_NO_SERVER="1"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    home = (workdir / "home").resolve()
    command = json.loads(proc.stdout)["hooks"]["Stop"]
    assert command == f"{sys.executable} -m ledger --home {home} hook stop"


class TestGateway:
    def test_gateway_routes_claude_code_in_the_same_file_and_keeps_its_env(self, workdir, tmp_path):
        target = tmp_path / "settings.json"
        target.write_text(json.dumps({**THEIRS, "env": {"LEDGER_AGENT": "builder-1"}}))
        url = "http://127.0.0.1:8787"
        done = install(Path("home"), "--settings", str(target), "--gateway", url,
                       cwd=workdir, env_home=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["gateway"] == url
        settings = json.loads(target.read_text())
        assert settings["env"] == {"LEDGER_AGENT": "builder-1", "ANTHROPIC_BASE_URL": url,
                                   "LEDGER_GATEWAY_URL": url}  # fmt: skip
        assert set(EVENTS) <= set(settings["hooks"])
        again = install(Path("home"), "--settings", str(target), "--gateway", url,
                        cwd=workdir, env_home=tmp_path)  # fmt: skip
        assert json.loads(again.stdout)["changed"] is False

    def test_proxy_listen_in_ledger_toml_is_the_gateway(self, workdir, tmp_path):
        toml = workdir / "home" / "ledger.toml"
        toml.write_text(toml.read_text() + '\n[proxy]\nlisten = "0.0.0.0:9191"\n')
        target = tmp_path / "settings.json"
        done = install(Path("home"), "--settings", str(target), cwd=workdir, env_home=tmp_path)
        assert done.returncode == 0, done.stderr
        env = json.loads(target.read_text())["env"]
        assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9191"

    def test_without_a_gateway_nothing_is_routed(self, workdir, tmp_path):
        target = tmp_path / "settings.json"
        done = install(Path("home"), "--settings", str(target), cwd=workdir, env_home=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "env" not in json.loads(target.read_text())

    @pytest.mark.parametrize("url", ["127.0.0.1:8787", "ftp://x", " http://x"])
    def test_a_gateway_that_is_not_a_url_is_exit_2_and_writes_nothing(self, workdir, tmp_path, url):
        target = tmp_path / "settings.json"
        done = install(Path("home"), "--settings", str(target), "--gateway", url,
                       cwd=workdir, env_home=tmp_path)  # fmt: skip
        assert done.returncode == 2
        assert done.stderr.startswith("ledger: --gateway must be an http:// or https:// URL")
        assert not target.exists()
