"""Claude Code's settings files: where a session's are, read, and replaced whole.

Claude Code reads, highest precedence first: managed settings (the policy
folder: ``$CLAUDE_CODE_MANAGED_SETTINGS_PATH``, else ``/etc/claude-code`` on
Linux and ``/Library/Application Support/ClaudeCode`` on macOS; its
``managed-settings.json`` and the ``managed-settings.d/*.json`` drop-ins), the
project's ``.claude/settings.local.json`` and ``.claude/settings.json``, and
the user's ``settings.json`` (in ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``).
"""

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ledger.edges.fileio import atomic_write, read_regular
from ledger.errors import InputDataError

MANAGED_FOLDERS = {"darwin": "/Library/Application Support/ClaudeCode"}
LINUX_MANAGED_FOLDER = "/etc/claude-code"


def user_settings(environ: Mapping[str, str]) -> Path:
    """The user's ``settings.json``."""
    folder = environ.get("CLAUDE_CONFIG_DIR") or str(Path.home() / ".claude")
    return Path(folder) / "settings.json"


def managed_settings(environ: Mapping[str, str]) -> list[Path]:
    """The managed settings files, highest precedence first (drop-ins over the main file)."""
    folder = Path(
        environ.get("CLAUDE_CODE_MANAGED_SETTINGS_PATH")
        or MANAGED_FOLDERS.get(sys.platform, LINUX_MANAGED_FOLDER)
    )
    drop_ins = folder / "managed-settings.d"
    try:
        names = sorted(
            (entry.name for entry in drop_ins.iterdir() if entry.name.endswith(".json")),
            reverse=True,
        )
    except OSError:
        names = []
    return [
        *(drop_ins / name for name in names if not name.startswith(".")),
        folder / "managed-settings.json",
    ]


def session_files(project: Path | None, environ: Mapping[str, str]) -> list[tuple[str, Path]]:
    """Every settings file of a session in ``project``, with its scope, highest first.

    Without a project: the managed settings and the user's.
    """
    found = [("managed", path) for path in managed_settings(environ)]
    if project is not None:
        found.append(("local", project / ".claude" / "settings.local.json"))
        found.append(("project", project / ".claude" / "settings.json"))
    found.append(("user", user_settings(environ)))
    return [(scope, path.absolute()) for scope, path in found]


def project_of(path: Path, environ: Mapping[str, str]) -> Path | None:
    """The project a settings file belongs to (``DIR/.claude/settings[.local].json``), if any."""
    if path.absolute() == user_settings(environ).absolute():
        return None
    names = {"settings.json", "settings.local.json"}
    if path.parent.name == ".claude" and path.name in names:
        return path.parent.parent.absolute()
    return None


class SettingsFile:
    """Reads a settings file and replaces it atomically, keeping its permissions."""

    def read(self, path: Path) -> bytes | None:
        """The file's bytes, or ``None`` when there is no such file.

        Raises:
            InputDataError: it exists but cannot be read, or is not a regular file.
        """
        try:
            return read_regular(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise InputDataError(f"cannot read {path}: {exc.strerror}") from exc

    def write(self, path: Path, data: bytes) -> None:
        """Replace the file with ``data`` (created with its folders when missing).

        A symbolic link stays a link: the file it points to is replaced (a
        settings file kept in a dotfiles repository stays there).

        Raises:
            ChainIOError: the write failed; the file is unchanged.
        """
        if path.is_symlink():
            path = Path(os.path.realpath(path))
        try:
            mode = path.stat().st_mode & 0o777
        except OSError:
            mode = 0o644
        atomic_write(path, data, mode)
