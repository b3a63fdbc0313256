"""Merging ledger's hooks into Claude Code settings, pure."""

import json
from pathlib import Path

import pytest

from ledger.core.hook_settings import SettingsError, is_ledger_hook, merge_hooks

DEPLOYED = Path(__file__).resolve().parents[3] / "deploy" / "claude-code" / "settings.json"


def test_the_shipped_settings_are_what_install_writes():
    deployed = json.loads(DEPLOYED.read_text())
    merged = merge_hooks({"env": deployed["env"]}, ["/usr/local/bin/ledger"],
                         "/var/lib/ledger/agents")  # fmt: skip
    assert merged.settings == deployed
    assert (
        merge_hooks(deployed, ["/usr/local/bin/ledger"], "/var/lib/ledger/agents").changed is False
    )


def test_paths_with_spaces_are_quoted_for_the_shell():
    merged = merge_hooks(None, ["/opt/my tools/ledger"], "/srv/ledger home")
    assert merged.commands["Stop"] == "'/opt/my tools/ledger' --home '/srv/ledger home' hook stop"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ledger hook stop", True),
        ("/venv/bin/ledger --home /x hook stop", True),
        ("/usr/bin/python3 -m ledger --home /x hook stop", True),
        ("/venv/bin/ledger hook stop --gateway https://gw:8787 --key-env LK", True),
        ("/venv/bin/ledger hook stop --gateway https://gw:8787", False),
        ("ledger hook pre-tool-use", False),
        ("other-ledger hook stop", False),
        ("echo 'unclosed", False),
        (None, False),
    ],
)
def test_an_earlier_ledger_hook_is_recognised(command, expected):
    assert is_ledger_hook(command, "stop") is expected


@pytest.mark.parametrize("settings", [[], {"hooks": []}, {"hooks": {"Stop": {}}}])
def test_settings_claude_code_would_not_read_are_refused(settings):
    with pytest.raises(SettingsError):
        merge_hooks(settings, ["/l"], "/h")


class TestGateway:
    def test_a_gateway_is_set_beside_the_users_env_and_twice_changes_nothing(self):
        url = "http://127.0.0.1:8787"
        merged = merge_hooks({"env": {"FOO": "1"}}, ["/bin/ledger"], "/h", url)
        assert merged.settings["env"] == {
            "FOO": "1", "ANTHROPIC_BASE_URL": url, "LEDGER_GATEWAY_URL": url
        }  # fmt: skip
        assert merged.changed is True
        assert merge_hooks(merged.settings, ["/bin/ledger"], "/h", url).changed is False

    def test_another_gateway_replaces_the_first(self):
        first = merge_hooks(None, ["/bin/ledger"], "/h", "http://127.0.0.1:1").settings
        again = merge_hooks(first, ["/bin/ledger"], "/h", "http://127.0.0.1:2")
        assert again.changed is True
        assert again.settings["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:2"

    def test_env_that_is_not_an_object_is_refused(self):
        with pytest.raises(SettingsError, match="env is not an object"):
            merge_hooks({"env": ["x"]}, ["/bin/ledger"], "/h", "http://127.0.0.1:1")


def test_a_laptop_install_replaces_a_home_install_and_asks_the_gateway():
    """A reinstall on a laptop leaves one ledger hook per event, now asking the gateway."""
    from ledger.core.hook_settings import Laptop

    earlier = merge_hooks(None, ["/venv/bin/ledger"], "/srv/ledger").settings
    merged = merge_hooks(earlier, ["/venv/bin/ledger"], Laptop("https://gw:8787", "LK"))

    assert (
        merged.commands["Stop"]
        == "/venv/bin/ledger hook stop --gateway https://gw:8787 --key-env LK"
    )
    assert merged.replaced == [
        f"/venv/bin/ledger --home /srv/ledger hook {action}"
        for action in ("pre-tool-use", "post-tool-use", "stop", "user-prompt-submit", "session-end")
    ]
    assert merged.settings["apiKeyHelper"] == "printenv LK"
    assert merged.settings["env"]["ANTHROPIC_BASE_URL"] == "https://gw:8787"
