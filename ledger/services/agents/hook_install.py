"""``ledger hook install``: ledger's Claude Code hooks written into a ``settings.json``.

The merge itself is pure (``ledger.core.hook_settings``); this reads the file,
refuses one it cannot merge into without losing something, and writes only
when something changed, so installing twice leaves the file untouched.
"""

import json
from pathlib import Path
from typing import Any, Protocol

from ledger.core.hook_settings import SettingsError, merge_hooks
from ledger.errors import InputDataError


class SettingsFiles(Protocol):
    """Settings files of another program, read and replaced whole."""

    def read(self, path: Path) -> bytes | None:
        """The file's bytes, or ``None`` when there is none."""
        ...

    def write(self, path: Path, data: bytes) -> None:
        """Replace the file with ``data``."""
        ...


def install_hooks(
    files: SettingsFiles,
    path: Path,
    launcher: list[str],
    home: Path,
    gateway: str | None = None,
    cloud_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Merge ledger's hooks into the settings at ``path``; what was written, as JSON.

    ``gateway`` (a URL) also routes the session's model calls through it;
    ``cloud_env`` is the ``env`` of a cloud mode (Bedrock, Vertex) through it.

    Raises:
        InputDataError: the file cannot be read, is not JSON, or is not
            settings Claude Code reads; nothing is written then.
        ChainIOError: the file cannot be written.
    """
    raw = files.read(path)
    try:
        settings = None if raw is None else json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InputDataError(f"{path} is not valid JSON: {exc}") from exc
    try:
        merged = merge_hooks(settings, launcher, str(home), gateway, cloud_env)
    except SettingsError as exc:
        raise InputDataError(f"{path}: {exc}; nothing written") from exc
    if merged.changed:
        files.write(path, (json.dumps(merged.settings, indent=2) + "\n").encode())
    return {
        "settings": str(path),
        "changed": merged.changed,
        "home": str(home),
        "gateway": gateway,
        **({"env": cloud_env} if cloud_env else {}),
        "hooks": merged.commands,
        "replaced": merged.replaced,
    }
