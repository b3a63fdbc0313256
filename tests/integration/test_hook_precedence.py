"""``hook install`` and ``hook status`` read the whole of Claude Code's settings precedence.

Managed settings (the policy folder, here ``$CLAUDE_CODE_MANAGED_SETTINGS_PATH``,
as Claude Code itself reads it), the project's ``settings.local.json`` and
``settings.json``, the user's ``settings.json``: install refuses (78, naming
the file and key) when the session it configures would not be gated, and
status says where the calls go and which file decided it.
"""

import json
from pathlib import Path
from typing import Any

import pytest

GATEWAY = "http://127.0.0.1:8787"
ELSEWHERE = "https://llm-proxy.example.com"


@pytest.fixture
def machine(tmp_path: Path, home: Path) -> dict[str, Path]:
    """A user HOME, a managed-settings folder and a project, all empty."""
    places = {
        "home": home,
        "user_home": tmp_path / "user",
        "managed": tmp_path / "managed",
        "project": tmp_path / "project",
    }
    for name in ("user_home", "managed", "project"):
        places[name].mkdir()
    return places


def _files(machine: dict[str, Path]) -> dict[str, Path]:
    return {
        "managed": machine["managed"] / "managed-settings.json",
        "managed.d": machine["managed"] / "managed-settings.d" / "50-policy.json",
        "local": machine["project"] / ".claude" / "settings.local.json",
        "project": machine["project"] / ".claude" / "settings.json",
        "user": machine["user_home"] / ".claude" / "settings.json",
    }


def _write(path: Path, settings: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings))


def _run(run_inproc: Any, machine: dict[str, Path], *args: str) -> Any:
    env = {
        "HOME": str(machine["user_home"]),
        "CLAUDE_CODE_MANAGED_SETTINGS_PATH": str(machine["managed"]),
        "ANTHROPIC_BASE_URL": "",
    }
    return run_inproc(["--home", str(machine["home"]), "hook", *args], env=env)


BASE_ELSEWHERE = {"env": {"ANTHROPIC_BASE_URL": ELSEWHERE}}
NO_HOOKS = {"disableAllHooks": True}
# (file, what it sets, key named) for the project target: each higher file, and the
# user file whose disableAllHooks the project file does not override.
REFUSED = [
    ("managed", BASE_ELSEWHERE, "env.ANTHROPIC_BASE_URL"),
    ("managed", NO_HOOKS, "disableAllHooks"),
    ("managed", {"allowManagedHooksOnly": True}, "allowManagedHooksOnly"),
    ("managed.d", BASE_ELSEWHERE, "env.ANTHROPIC_BASE_URL"),
    ("managed.d", NO_HOOKS, "disableAllHooks"),
    ("local", BASE_ELSEWHERE, "env.ANTHROPIC_BASE_URL"),
    ("local", NO_HOOKS, "disableAllHooks"),
    ("user", NO_HOOKS, "disableAllHooks"),
]


@pytest.mark.parametrize(("where", "settings", "key"), REFUSED)
def test_install_refuses_when_another_file_turns_the_gate_off(
    run_inproc, machine, where, settings, key
):
    """78 naming the file and key; nothing written; status agrees the session is ungated."""
    files = _files(machine)
    _write(files[where], settings)
    refused = _run(run_inproc, machine, "install", "--project", str(machine["project"]),
                   "--gateway", GATEWAY)  # fmt: skip
    assert refused.code == 78, refused.stderr
    assert str(files[where]) in refused.stderr
    assert key in refused.stderr
    assert not files["project"].exists()
    status = _run(run_inproc, machine, "status", str(machine["project"]))
    assert status.code == 1
    assert status.json()["gated"] is False


@pytest.mark.parametrize(
    ("where", "settings"),
    [
        ("user", BASE_ELSEWHERE),  # below the project file: the project's URL wins
        ("local", {"env": {"ANTHROPIC_BASE_URL": GATEWAY + "/"}}),  # the gateway itself
        ("local", {"disableAllHooks": False}),
        ("managed", {"model": "opus"}),
    ],
)
def test_install_succeeds_when_nothing_above_it_turns_the_gate_off(
    run_inproc, machine, where, settings
):
    files = _files(machine)
    _write(files[where], settings)
    installed = _run(run_inproc, machine, "install", "--project", str(machine["project"]),
                     "--gateway", GATEWAY)  # fmt: skip
    assert installed.code == 0, installed.stderr
    status = _run(run_inproc, machine, "status", str(machine["project"]))
    assert status.code == 0, status.stdout
    shown = status.json()
    assert shown["gated"] is True
    assert shown["gateway_url"].rstrip("/") == GATEWAY
    assert shown["hooks_active"] is True
    assert shown["hooks_from"] == [str(files["project"])]


def test_the_user_file_answers_to_managed_settings_only(run_inproc, machine):
    """Installing for the user: managed settings above it refuse; nothing else is read."""
    files = _files(machine)
    _write(files["managed"], BASE_ELSEWHERE)
    refused = _run(run_inproc, machine, "install", "--gateway", GATEWAY)
    assert refused.code == 78
    assert str(files["managed"]) in refused.stderr
    files["managed"].unlink()
    installed = _run(run_inproc, machine, "install", "--gateway", GATEWAY)
    assert installed.code == 0, installed.stderr
    assert installed.json()["settings"] == str(files["user"])


def test_another_base_url_in_the_file_itself_is_replaced_only_with_force(run_inproc, machine):
    files = _files(machine)
    _write(files["project"], {"env": {"ANTHROPIC_BASE_URL": ELSEWHERE, "OTHER": "1"}})
    args = ("install", "--project", str(machine["project"]), "--gateway", GATEWAY)
    refused = _run(run_inproc, machine, *args)
    assert refused.code == 78
    assert f"{files['project']} sets env.ANTHROPIC_BASE_URL = {ELSEWHERE}" in refused.stderr
    assert "--force" in refused.stderr
    assert json.loads(files["project"].read_text())["env"]["ANTHROPIC_BASE_URL"] == ELSEWHERE
    forced = _run(run_inproc, machine, *args, "--force")
    assert forced.code == 0, forced.stderr
    assert forced.json()["replaced_base_url"] == ELSEWHERE
    assert f"replaced env.ANTHROPIC_BASE_URL {ELSEWHERE} with {GATEWAY}" in forced.stderr
    env = json.loads(files["project"].read_text())["env"]
    assert (env["ANTHROPIC_BASE_URL"], env["OTHER"]) == (GATEWAY, "1")
    again = _run(run_inproc, machine, *args)
    assert (again.code, again.json()["changed"]) == (0, False)


def test_hooks_only_install_leaves_another_base_url_alone(run_inproc, machine):
    """Without a gateway the base URL is not ledger's to judge; status says it is soft."""
    files = _files(machine)
    _write(files["local"], BASE_ELSEWHERE)
    installed = _run(run_inproc, machine, "install", "--project", str(machine["project"]))
    assert installed.code == 0, installed.stderr
    shown = _run(run_inproc, machine, "status", str(machine["project"])).json()
    assert (shown["gateway_url"], shown["gateway_url_from"]) == (ELSEWHERE, str(files["local"]))
    assert (shown["hooks_active"], shown["through_gateway"], shown["gated"]) == (True, False, True)


def test_a_symlinked_settings_file_stays_a_link(run_inproc, machine, tmp_path):
    files = _files(machine)
    kept = tmp_path / "dotfiles" / "claude-settings.json"
    _write(kept, {"model": "opus"})
    files["user"].parent.mkdir(parents=True)
    files["user"].symlink_to(kept)
    installed = _run(run_inproc, machine, "install", "--gateway", GATEWAY)
    assert installed.code == 0, installed.stderr
    assert files["user"].is_symlink()
    written = json.loads(kept.read_text())
    assert (written["model"], written["env"]["ANTHROPIC_BASE_URL"]) == ("opus", GATEWAY)


def test_status_of_a_session_with_nothing_installed_is_ungated(run_inproc, machine):
    status = _run(run_inproc, machine, "status", str(machine["project"]))
    assert status.code == 1
    shown = status.json()
    assert (shown["gateway_url"], shown["hooks_active"], shown["gated"]) == (None, False, False)
    assert [entry["scope"] for entry in shown["files"]] == ["managed", "local", "project", "user"]


def test_status_names_the_file_that_routes_the_calls_elsewhere(run_inproc, machine):
    """Installed for the user, then a project's local file points elsewhere: ungated there."""
    files = _files(machine)
    assert _run(run_inproc, machine, "install", "--gateway", GATEWAY).code == 0
    _write(files["local"], BASE_ELSEWHERE)
    status = _run(run_inproc, machine, "status", str(machine["project"]))
    assert status.code == 1
    shown = status.json()
    assert (shown["gateway_url"], shown["gateway_url_from"]) == (ELSEWHERE, str(files["local"]))
    assert (shown["expected_gateway"], shown["hooks_active"]) == (GATEWAY, True)
    assert shown["hooks_from"] == [str(files["user"])]
