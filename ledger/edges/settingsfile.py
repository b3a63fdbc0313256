"""Another program's settings file (Claude Code's ``settings.json``), read and replaced whole."""

from pathlib import Path

from ledger.edges.fileio import atomic_write, read_regular
from ledger.errors import InputDataError


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

        Raises:
            ChainIOError: the write failed; the file is unchanged.
        """
        try:
            mode = path.stat().st_mode & 0o777
        except OSError:
            mode = 0o644
        atomic_write(path, data, mode)
