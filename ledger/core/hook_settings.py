"""Claude Code ``settings.json`` with ledger's hooks merged in, as pure translation.

Claude Code reads hooks from ``settings.json``: ``hooks.<Event>`` is a list of
groups ``{"matcher": "<tool pattern>", "hooks": [{"type": "command",
"command": "…", "timeout": N}]}`` (events without tools take no matcher).
Each hook command names the absolute path of ``ledger`` and ``--home`` with
the absolute home, so neither a missing ``PATH`` entry (exit 127, after which
Claude Code runs the tool anyway) nor a changed working directory can turn
the guard off.

With a gateway, ``env.ANTHROPIC_BASE_URL`` (every model call Claude Code
makes goes through it) and ``env.LEDGER_GATEWAY_URL`` (the hooks then leave
gating each call to it) are set in the same file.

Merging keeps every other hook and setting. A ledger hook already there for
the same event is replaced (a reinstall with another home or launcher leaves
one, not two); the same command already there is left as it is, so
installing twice changes nothing.
"""

import shlex
from typing import Any, NamedTuple

TIMEOUT_SECONDS = 15
BASE_URL_VARIABLE = "ANTHROPIC_BASE_URL"
GATEWAY_VARIABLE = "LEDGER_GATEWAY_URL"


class HookSpec(NamedTuple):
    """One event's hook: Claude Code's event name, the ``ledger hook`` action, its matcher."""

    event: str
    action: str
    matcher: str | None


HOOKS = (
    HookSpec("PreToolUse", "pre-tool-use", "*"),
    HookSpec("PostToolUse", "post-tool-use", "*"),
    HookSpec("Stop", "stop", None),
    HookSpec("UserPromptSubmit", "user-prompt-submit", None),
    HookSpec("SessionEnd", "session-end", None),
)


class SettingsError(ValueError):
    """Settings that cannot be merged into without losing something; the message says why."""


class Merged(NamedTuple):
    """The settings to write, whether they changed, and each event's command."""

    settings: dict[str, Any]
    changed: bool
    commands: dict[str, str]
    replaced: list[str]
    # The env.ANTHROPIC_BASE_URL the gateway took the place of (another URL was there).
    replaced_base_url: str | None = None


class Laptop(NamedTuple):
    """A machine without a ledger home: the gateway's URL and the variable holding its key."""

    gateway: str
    key_env: str

    def options(self) -> list[str]:
        """The options a hook or ``statusline`` command takes to ask the gateway."""
        return ["--gateway", self.gateway, "--key-env", self.key_env]

    def env(self) -> dict[str, str]:
        """The ``env`` beside the gateway's URL.

        Claude Code sends a key from ``ANTHROPIC_API_KEY`` or
        ``ANTHROPIC_AUTH_TOKEN`` in the shell before the helper's: blanked for
        its sessions, the developer's own provider key never reaches the gateway.
        """
        return {"ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": ""}

    def api_key_helper(self) -> str:
        """Claude Code's ``apiKeyHelper``: prints the key from the environment.

        The settings never hold the secret; with the variable unset the helper
        fails, and so does every call.
        """
        return shlex.join(["printenv", self.key_env])


# Where a hook finds its figures: a home (its absolute path), or a laptop's gateway.
Place = str | Laptop


def hook_command(launcher: list[str], home: Place, action: str) -> str:
    """The shell command of one hook: the launcher's argv, ``--home HOME``, ``hook ACTION``.

    On a laptop: ``hook ACTION --gateway URL --key-env VAR`` instead of a home.
    """
    if isinstance(home, Laptop):
        return shlex.join([*launcher, "hook", action, *home.options()])
    return shlex.join([*launcher, "--home", home, "hook", action])


def _without_laptop_options(words: list[str]) -> list[str]:
    if len(words) > 4 and words[-4] == "--gateway" and words[-2] == "--key-env":  # noqa: PLR2004
        return words[:-4]
    return words


def _runs_ledger(words: list[str]) -> bool:
    for index, word in enumerate(words):
        if word.rsplit("/", 1)[-1] == "ledger":
            return True
        if word == "-m" and index + 1 < len(words) and words[index + 1] == "ledger":
            return True
    return False


def is_ledger_hook(command: object, action: str) -> bool:
    """Whether ``command`` runs ``ledger … hook ACTION`` (an earlier install of this hook)."""
    if not isinstance(command, str):
        return False
    try:
        words = _without_laptop_options(shlex.split(command))
    except ValueError:
        return False
    return words[-2:] == ["hook", action] and _runs_ledger(words[:-2])


def _groups(hooks: dict[str, Any], event: str) -> list[Any]:
    groups = hooks.get(event, [])
    if not isinstance(groups, list) or not all(
        isinstance(group, dict) and isinstance(group.get("hooks", []), list) for group in groups
    ):
        raise SettingsError(f"hooks.{event} is not a list of hook groups")
    return groups


def _merge_event(
    groups: list[Any], spec: HookSpec, command: str, replaced: list[str]
) -> tuple[list[Any], bool]:
    """``groups`` with ``command`` as the event's one ledger hook; whether it changed."""
    found = False
    kept_groups = []
    for group in groups:
        kept = []
        for hook in group.get("hooks", []):
            text = hook.get("command") if isinstance(hook, dict) else None
            if text == command and not found:
                found = True
                kept.append(hook)
            elif is_ledger_hook(text, spec.action):
                replaced.append(str(text))
            else:
                kept.append(hook)
        if kept or not group.get("hooks"):
            kept_groups.append({**group, "hooks": kept} if "hooks" in group else group)
    if not found:
        entry = {"type": "command", "command": command, "timeout": TIMEOUT_SECONDS}
        group = {"hooks": [entry]}
        if spec.matcher is not None:
            group = {"matcher": spec.matcher, **group}
        kept_groups.append(group)
    return kept_groups, kept_groups != groups


def _merge_env(
    settings: dict[str, Any], gateway: str | None, more: dict[str, str] | None = None
) -> dict[str, Any]:
    """``settings`` routed through ``gateway`` (unchanged without one), with ``more`` env."""
    if gateway is None:
        return settings
    env = settings.get("env", {})
    if not isinstance(env, dict):
        raise SettingsError("env is not an object")
    routed = {**env, BASE_URL_VARIABLE: gateway, GATEWAY_VARIABLE: gateway, **(more or {})}
    return {**settings, "env": routed}


def merge_hooks(
    settings: object,
    launcher: list[str],
    home: Place,
    gateway: str | None = None,
    cloud_env: dict[str, str] | None = None,
) -> Merged:
    """``settings`` (a parsed ``settings.json``; ``None`` for none) with ledger's hooks.

    ``gateway`` (a URL) also routes the session's model calls through it;
    ``cloud_env`` is the ``env`` of a cloud mode (Bedrock, Vertex) through it.
    A ``Laptop`` for ``home`` routes them through its gateway with the key
    Claude Code's ``apiKeyHelper`` reads from the environment.

    Raises:
        SettingsError: the settings, their ``hooks`` or ``env``, are not what
            Claude Code reads (not an object, an event that is not a list of groups).
    """
    if settings is None:
        settings = {}
    if not isinstance(settings, dict):
        raise SettingsError("not a JSON object")
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError("hooks is not an object")
    merged_hooks = dict(hooks)
    commands: dict[str, str] = {}
    replaced: list[str] = []
    changed = "hooks" not in settings
    for spec in HOOKS:
        command = hook_command(launcher, home, spec.action)
        commands[spec.event] = command
        groups, event_changed = _merge_event(_groups(hooks, spec.event), spec, command, replaced)
        merged_hooks[spec.event] = groups
        changed = changed or event_changed
    if isinstance(home, Laptop):
        gateway = home.gateway
        cloud_env = {**home.env(), **(cloud_env or {})}
    routed = _merge_env(settings, gateway, cloud_env)
    if isinstance(home, Laptop):
        routed["apiKeyHelper"] = home.api_key_helper()
    changed = changed or any(routed.get(k) != settings.get(k) for k in ("env", "apiKeyHelper"))
    env = settings.get("env")
    previous = env.get(BASE_URL_VARIABLE) if isinstance(env, dict) else None
    elsewhere = None
    if gateway is not None and previous is not None and str(previous).rstrip("/") != gateway:
        elsewhere = str(previous)
    return Merged({**routed, "hooks": merged_hooks}, changed, commands, replaced, elsewhere)
