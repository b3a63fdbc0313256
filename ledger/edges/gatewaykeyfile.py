"""The home's gateway key file (``gateway_keys.json``, mode 0600): digests, never secrets.

Changes are made under an exclusive lock beside the file and written
atomically, so two ``keys issue`` at once both land; readers never see half a
file.
"""

import json
import secrets
from collections.abc import Callable
from pathlib import Path

from ledger.core.gateway_keys import GatewayKey, keys_document, keys_from_document
from ledger.edges.fileio import atomic_write, read_json_file
from ledger.edges.locks import exclusive_lock

KeyEdit = Callable[[list[GatewayKey]], list[GatewayKey]]


class GatewayKeyFile:
    """The gateway keys of a file-store home."""

    def __init__(self, path: Path, lock_timeout: float) -> None:
        self.path = path
        self._lock = path.with_name(path.name + ".lock")
        self._timeout = lock_timeout

    def load(self) -> list[GatewayKey]:
        """Every issued key (none when the file does not exist yet).

        Raises:
            InputDataError: the file is unreadable or not a key file.
        """
        if not self.path.exists():
            return []
        return keys_from_document(read_json_file(self.path, "gateway key file"), str(self.path))

    def change(self, edit: KeyEdit) -> None:
        """Replace the keys with ``edit(keys)``, under the lock.

        Raises:
            LockTimeoutError: another change held the lock too long.
            ChainIOError: the file cannot be written.
        """
        with exclusive_lock(self._lock, self._timeout):
            keys = edit(self.load())
            data = json.dumps(keys_document(keys), indent=1, sort_keys=True).encode() + b"\n"
            atomic_write(self.path, data, mode=0o600)

    @staticmethod
    def new_secret() -> str:
        """A fresh secret: ``lk_`` and 256 bits from the operating system."""
        return "lk_" + secrets.token_urlsafe(32)
