"""A hook run by a user who may not use the home names that cause and its fixes.

The home belongs to another user (``nobody``); the hook runs as root with its
power to override file permissions dropped from its capability bounding set
(``setpriv``), so the permissions really refuse it, as they refuse any other
user. The reason names the entry, its owner and the fixes (run as the owner,
a shared group, or the laptop set-up through the gateway), never the halt
reasons of a budget (recover, rebuild the state) that would not help.
"""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.conftest import clean_env

SETPRIV = shutil.which("setpriv")
pytestmark = pytest.mark.skipif(
    SETPRIV is None or os.geteuid() != 0, reason="needs root and setpriv (util-linux)"
)
NOBODY = 65534
PRE_TOOL_USE = {"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Bash",
                "tool_input": {"command": "ls"}}  # fmt: skip


def _chown(home: Path) -> None:
    for root, dirs, files in os.walk(home):
        for name in [*dirs, *files]:
            os.chown(Path(root) / name, NOBODY, NOBODY)
    os.chown(home, NOBODY, NOBODY)


def _as_another_user(home: Path, event: Mapping[str, object], action: str) -> dict[str, object]:
    assert SETPRIV is not None
    done = subprocess.run(
        [SETPRIV, "--bounding-set", "-dac_override,-dac_read_search", "--",
         sys.executable, "-m", "ledger", "--home", str(home), "hook", action],
        input=json.dumps(event), env=clean_env(LEDGER_NOW="2026-03-02T10:00:00Z"),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


@pytest.mark.parametrize(
    ("home_mode", "keys_mode", "said"),
    [
        (0o755, 0o700, "needs read-write access to the home itself (owned by nobody, mode 0755)"),
        (0o700, 0o700, "needs read-write access to the home itself (owned by nobody, mode 0700)"),
        (0o777, 0o700, "needs read access to keys (owned by nobody, mode 0700)"),
    ],
)
def test_another_users_home_is_named_with_its_fixes(home, home_mode, keys_mode, said):
    _chown(home)
    (home / "keys").chmod(keys_mode)
    home.chmod(home_mode)
    before = sorted(p.name for p in home.iterdir())

    answer = _as_another_user(home, PRE_TOOL_USE, "pre-tool-use")

    output = answer["hookSpecificOutput"]
    assert isinstance(output, dict)
    assert output["permissionDecision"] == "deny"
    reason = str(output["permissionDecisionReason"])
    assert f"ledger home {home} cannot be used by user root: it {said}" in reason
    assert "run Claude Code as nobody" in reason
    assert "chmod -R g+rwX" in reason
    assert "ledger hook install --gateway URL --key-env VAR" in reason
    assert reason.endswith("tool call refused (fail-closed)")
    for wrong in ("recover", "rebuild-state", "halt-uncertainty"):
        assert wrong not in reason
    home.chmod(0o755)
    assert sorted(p.name for p in home.iterdir()) == before


def test_a_stop_hook_stops_the_session_with_the_same_cause(home):
    _chown(home)
    home.chmod(0o755)

    answer = _as_another_user(home, {**PRE_TOOL_USE, "hook_event_name": "Stop"}, "stop")

    assert answer["continue"] is False
    assert "cannot be used by user root" in str(answer["stopReason"])


def test_hook_install_refuses_a_home_its_hooks_could_not_use(home, tmp_path):
    """Installing hooks that would refuse every tool call is refused up front (exit 78)."""
    _chown(home)
    home.chmod(0o755)
    assert SETPRIV is not None
    done = subprocess.run(
        [SETPRIV, "--bounding-set", "-dac_override,-dac_read_search", "--",
         sys.executable, "-m", "ledger", "--home", str(home), "hook", "install",
         "--settings", str(tmp_path / "settings.json")],
        env=clean_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert done.returncode == 78, done.stderr
    assert "cannot be used by user root" in done.stderr
    assert not (tmp_path / "settings.json").exists()
