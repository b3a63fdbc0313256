"""``ledger hook install`` and ``hook status``: ledger's gate in a Claude Code session.

The merge itself is pure (``ledger.core.hook_settings``), and so is reading a
session's settings precedence (``ledger.core.claude_settings``). Install reads
every settings file of the session it configures, refuses when the result
would not be gated (a file that takes precedence routes the calls elsewhere
or turns hooks off; the target routes them elsewhere and ``force`` is not
given), and writes only when something changed, so installing twice leaves
the file untouched.
"""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ledger.core.claude_settings import Layer, install_blocker, session_status
from ledger.core.hook_settings import BASE_URL_VARIABLE, Laptop, SettingsError, merge_hooks
from ledger.core.statusline_settings import ADDED, with_statusline
from ledger.errors import ConfigError, InputDataError


class SettingsFiles(Protocol):
    """Settings files of another program, read and replaced whole."""

    def read(self, path: Path) -> bytes | None:
        """The file's bytes, or ``None`` when there is none."""
        ...

    def write(self, path: Path, data: bytes) -> None:
        """Replace the file with ``data``."""
        ...


def _parsed(files: SettingsFiles, path: Path) -> Any:
    raw = files.read(path)
    try:
        return None if raw is None else json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InputDataError(f"{path} is not valid JSON: {exc}") from exc


def read_layers(files: SettingsFiles, session: Sequence[tuple[str, Path]]) -> list[Layer]:
    """The session's settings files, read, highest precedence first.

    Raises:
        InputDataError: one cannot be read or is not JSON.
    """
    return [Layer(scope, str(path), _parsed(files, path)) for scope, path in session]


def install_hooks(
    files: SettingsFiles, path: Path, launcher: list[str], home: Path | Laptop,
    gateway: str | None = None,
    session: Sequence[tuple[str, Path]] = (), *, force: bool = False,
    cloud_env: dict[str, str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Merge ledger's hooks into the settings at ``path``; what was written, as JSON.

    ``gateway`` (a URL) also routes the session's model calls through it.
    ``session`` is every settings file of the session, ``path`` among them
    (scope and path, highest precedence first); ``force`` lets the gateway
    take the place of another ``env.ANTHROPIC_BASE_URL`` in ``path``.
    ``cloud_env`` is the ``env`` of a cloud mode (Bedrock, Vertex) through it.
    A ``Laptop`` for ``home`` sets up a machine without a home: the hooks and
    the status line ask its gateway, with the key its variable holds.

    Raises:
        InputDataError: a file cannot be read, is not JSON, or is not
            settings Claude Code reads; nothing is written then.
        ConfigError: the session would not be gated (the message names the
            file and key); nothing is written then.
        ChainIOError: the file cannot be written.
    """
    settings = _parsed(files, path)
    place = home if isinstance(home, Laptop) else str(home)
    if isinstance(home, Laptop):
        gateway = home.gateway
    try:
        merged = merge_hooks(settings, launcher, place, gateway, cloud_env)
    except SettingsError as exc:
        raise InputDataError(f"{path}: {exc}; nothing written") from exc
    layers = [
        Layer(scope, str(found), merged.settings if found == path else _parsed(files, found))
        for scope, found in session
    ] or [Layer("target", str(path), merged.settings)]
    blocker = install_blocker(layers, str(path), gateway)
    if blocker is not None:
        where, key = blocker
        raise ConfigError(
            f"{where} sets {key}, so Claude Code would not be gated in this session "
            f"(settings precedence: managed, project local, project, user); nothing written: "
            f"change that file, then run hook install again"
        )
    if merged.replaced_base_url is not None and not force:
        raise ConfigError(
            f"{path} sets env.{BASE_URL_VARIABLE} = {merged.replaced_base_url}, not the gateway "
            f"{gateway}; nothing written (--force replaces it)"
        )
    # Claude Code's status line shows the session's spend and what is left (ledger statusline).
    written, statusline = with_statusline(merged.settings, launcher, place)
    changed = merged.changed or statusline == ADDED
    if changed:
        files.write(path, (json.dumps(written, indent=2) + "\n").encode())
    return {
        "settings": str(path),
        "changed": changed,
        "home": None if isinstance(home, Laptop) else str(home),
        "gateway": gateway,
        **({"key_env": home.key_env} if isinstance(home, Laptop) else {}),
        **({"env": cloud_env} if cloud_env else {}),
        "hooks": merged.commands,
        "replaced": merged.replaced,
        "replaced_base_url": merged.replaced_base_url,
        "statusline": statusline,
    }


def hook_status(
    files: SettingsFiles, session: Sequence[tuple[str, Path]], home_gateway: str | None,
    environ_base_url: str | None,
) -> dict[str, Any]:  # fmt: skip
    """Where a session's model calls go, whether ledger's hooks run, which file decided each.

    Raises:
        InputDataError: a settings file cannot be read or is not JSON.
    """
    return session_status(read_layers(files, session), home_gateway, environ_base_url)
