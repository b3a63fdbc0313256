"""What a Claude Code session will do, from its settings files in precedence order.

Claude Code reads up to four settings files for a session and merges them key
by key, the higher file winning: managed settings (the machine's policy
folder), the project's ``.claude/settings.local.json``, the project's
``.claude/settings.json``, then the user's ``~/.claude/settings.json``. Hooks
are the exception: every file's hooks run, unless the winning
``disableAllHooks`` is true, or managed settings set ``allowManagedHooksOnly``.

This says, for the layers given (highest first, as read), where the
session's model calls go (``env.ANTHROPIC_BASE_URL``), whether ledger's hooks
run, and which file decided each. Pure: the files are read elsewhere.
"""

from collections.abc import Sequence
from typing import Any, NamedTuple

from ledger.core.hook_settings import BASE_URL_VARIABLE, GATEWAY_VARIABLE, HOOKS, is_ledger_hook

MANAGED = "managed"


class Layer(NamedTuple):
    """One settings file: its scope, its path, and its parsed JSON (``None``: no file).

    Scopes are ``managed``, ``local``, ``project`` and ``user`` (or ``settings``
    for a file given by path).
    """

    scope: str
    path: str
    settings: Any


class Decided(NamedTuple):
    """A value and the file that decided it (``None`` for either: no file sets it)."""

    value: Any
    path: str | None


def _env(layer: Layer, name: str) -> Any:
    settings = layer.settings if isinstance(layer.settings, dict) else {}
    env = settings.get("env")
    return env.get(name) if isinstance(env, dict) else None


def env_value(layers: Sequence[Layer], name: str) -> Decided:
    """The winning ``env.<name>`` and the file that sets it."""
    for layer in layers:
        value = _env(layer, name)
        if isinstance(value, str):
            return Decided(value, layer.path)
    return Decided(None, None)


def setting(layers: Sequence[Layer], name: str) -> Decided:
    """The winning top-level ``name`` and the file that sets it."""
    for layer in layers:
        if isinstance(layer.settings, dict) and name in layer.settings:
            return Decided(layer.settings[name], layer.path)
    return Decided(None, None)


def _ledger_hooks(layer: Layer) -> set[str]:
    """The events ``layer`` has ledger's hook for."""
    settings = layer.settings if isinstance(layer.settings, dict) else {}
    hooks = settings.get("hooks")
    found: set[str] = set()
    if not isinstance(hooks, dict):
        return found
    for spec in HOOKS:
        groups = hooks.get(spec.event)
        for group in groups if isinstance(groups, list) else []:
            entries = group.get("hooks") if isinstance(group, dict) else None
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and is_ledger_hook(entry.get("command"), spec.action):
                    found.add(spec.event)
    return found


class HooksState(NamedTuple):
    """Whether ledger's hooks run: ``active``, the files holding them, what turns them off."""

    active: bool
    files: list[str]
    disabled_by: Decided


def hooks_state(layers: Sequence[Layer]) -> HooksState:
    """Whether every ledger hook runs in the session, and which files decided it."""
    disabled = setting(layers, "disableAllHooks")
    managed_only = Decided(None, None)
    for layer in layers:
        settings = layer.settings if isinstance(layer.settings, dict) else {}
        if layer.scope == MANAGED and settings.get("allowManagedHooksOnly") is True:
            managed_only = Decided("allowManagedHooksOnly", layer.path)
    events: set[str] = set()
    files = []
    for layer in layers:
        found = _ledger_hooks(layer)
        if found and (managed_only.path is None or layer.scope == MANAGED):
            events |= found
            files.append(layer.path)
    off = disabled if disabled.value is True else managed_only
    complete = events == {spec.event for spec in HOOKS}
    return HooksState(complete and off.path is None, files, off)


def _same_url(first: str | None, second: str | None) -> bool:
    if first is None or second is None:
        return False
    return first.strip().rstrip("/") == second.strip().rstrip("/")


def session_status(
    layers: Sequence[Layer], home_gateway: str | None, environ_base_url: str | None
) -> dict[str, Any]:
    """What ``ledger hook status`` prints: where calls go, whether hooks run, ``gated``.

    The command exits 1 when ``gated`` is false.

    ``home_gateway`` is the gateway of the home (``proxy.listen``), ``environ_base_url``
    the ``ANTHROPIC_BASE_URL`` of the environment Claude Code would start in (settings
    files set it over the environment's).
    """
    base = env_value(layers, BASE_URL_VARIABLE)
    if base.value is None and environ_base_url:
        base = Decided(environ_base_url, "environment")
    expected = env_value(layers, GATEWAY_VARIABLE)
    if expected.value is None and home_gateway is not None:
        expected = Decided(home_gateway, "proxy.listen")
    hooks = hooks_state(layers)
    through_gateway = _same_url(base.value, expected.value)
    gated = hooks.active and (expected.value is None or through_gateway)
    return {
        "gateway_url": base.value,
        "gateway_url_from": base.path,
        "expected_gateway": expected.value,
        "expected_gateway_from": expected.path,
        "through_gateway": through_gateway,
        "hooks_active": hooks.active,
        "hooks_from": hooks.files,
        "hooks_disabled_by": None
        if hooks.disabled_by.path is None
        else {"file": hooks.disabled_by.path, "key": _key_of(hooks.disabled_by)},
        "gated": gated,
        "files": [{"scope": layer.scope, "path": layer.path, "exists": layer.settings is not None}
                  for layer in layers],
    }  # fmt: skip


def _key_of(decided: Decided) -> str:
    return (
        "allowManagedHooksOnly" if decided.value == "allowManagedHooksOnly" else "disableAllHooks"
    )


def install_blocker(
    layers: Sequence[Layer], target: str, gateway: str | None
) -> tuple[str, str] | None:
    """Why a session configured by writing ``target`` would not be gated: (file, key).

    ``layers`` are as they will be after the write (the target with ledger's
    hooks and ``gateway`` in it). ``None``: the session is gated.
    """
    if gateway is not None:
        base = env_value(layers, BASE_URL_VARIABLE)
        if base.path is not None and base.path != target and not _same_url(base.value, gateway):
            return base.path, f"env.{BASE_URL_VARIABLE} = {base.value}"
    hooks = hooks_state(layers)
    if not hooks.active and hooks.disabled_by.path is not None:
        key = _key_of(hooks.disabled_by)
        return hooks.disabled_by.path, f"{key}: true"
    return None
