"""Claude Code's settings precedence, as pure evaluation of the files' JSON."""

from ledger.core.claude_settings import Layer, env_value, hooks_state, install_blocker
from ledger.core.hook_settings import merge_hooks

GATEWAY = "http://127.0.0.1:8787"


def _installed() -> dict[str, object]:
    return merge_hooks(None, ["/bin/ledger"], "/h", GATEWAY).settings


def test_the_highest_file_that_sets_a_value_decides_it():
    layers = [
        Layer("managed", "m", None),
        Layer("local", "l", {"env": {"ANTHROPIC_BASE_URL": "https://x"}}),
        Layer("project", "p", _installed()),
    ]
    assert env_value(layers, "ANTHROPIC_BASE_URL") == ("https://x", "l")
    assert install_blocker(layers, "p", GATEWAY) == ("l", "env.ANTHROPIC_BASE_URL = https://x")


def test_a_lower_base_url_is_overridden_but_a_winning_disable_all_hooks_is_not():
    lower_url = [Layer("project", "p", _installed()), Layer("user", "u", {"env": {
        "ANTHROPIC_BASE_URL": "https://x"}})]  # fmt: skip
    assert install_blocker(lower_url, "p", GATEWAY) is None
    lower_off = [Layer("project", "p", _installed()), Layer("user", "u", {"disableAllHooks": True})]
    assert install_blocker(lower_off, "p", GATEWAY) == ("u", "disableAllHooks: true")
    overridden = [Layer("project", "p", {**_installed(), "disableAllHooks": False}),
                  Layer("user", "u", {"disableAllHooks": True})]  # fmt: skip
    assert install_blocker(overridden, "p", GATEWAY) is None


def test_managed_hooks_only_turns_off_hooks_from_every_other_file():
    layers = [
        Layer("managed", "m", {"allowManagedHooksOnly": True}),
        Layer("user", "u", _installed()),
    ]
    state = hooks_state(layers)
    assert (state.active, state.files, state.disabled_by.path) == (False, [], "m")
