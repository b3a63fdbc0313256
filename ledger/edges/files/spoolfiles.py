"""``spool/`` in a home: records waiting for a database store that could not be reached.

One file per record, named by its idempotency key, written whole (temp file,
fsync, rename, fsync of the folder) before ``record`` reports it spooled, so an
acknowledged record survives a crash of the host. A file is removed only after
its record is sealed in the store (or found there already, by its key).
"""

import json
import os
from pathlib import Path
from typing import Any

from ledger.edges.fileio import atomic_write, read_regular
from ledger.errors import ChainIOError

SPOOL_FORMAT = "ledger-spool/1"
_SUFFIX = ".json"


class SpoolDir:
    """The spooled records of one home."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def new_key(self) -> str:
        """A fresh idempotency key for a record that came without one."""
        return f"spooled-{os.urandom(16).hex()}"

    def pending(self) -> bool:
        """Whether any record is waiting (cheap: one directory read)."""
        try:
            return any(path.name.endswith(_SUFFIX) for path in self.path.iterdir())
        except OSError:
            return False

    def add(self, key: str, spooled_at: str, request: dict[str, Any]) -> bool:
        """Store one record durably; returns ``False`` when its key is already spooled.

        Raises:
            ChainIOError: the file cannot be written (the record was not kept).
        """
        path = self.path / f"{key}{_SUFFIX}"
        if path.exists():
            return False
        body = {"format": SPOOL_FORMAT, "key": key, "spooled_at": spooled_at, "request": request}
        data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n"
        try:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ChainIOError(f"cannot create {self.path}: {exc.strerror}") from exc
        atomic_write(path, data, 0o600)
        return True

    def entries(self) -> list[dict[str, Any]]:
        """Every spooled record, oldest first (unreadable files are left for an operator)."""
        found = []
        try:
            names = sorted(p.name for p in self.path.iterdir() if p.name.endswith(_SUFFIX))
        except OSError:
            return []
        for name in names:
            try:
                document = json.loads(read_regular(self.path / name))
            except (OSError, ValueError):
                continue
            if (
                isinstance(document, dict)
                and document.get("format") == SPOOL_FORMAT
                and document.get("key") == name.removesuffix(_SUFFIX)
                and isinstance(document.get("request"), dict)
            ):
                found.append(document)
        found.sort(key=lambda document: (str(document.get("spooled_at")), document["key"]))
        return found

    def remove(self, key: str) -> None:
        """Forget a record once the store holds it.

        Raises:
            ChainIOError: the file cannot be removed.
        """
        try:
            (self.path / f"{key}{_SUFFIX}").unlink(missing_ok=True)
        except OSError as exc:
            raise ChainIOError(f"cannot remove spooled record {key}: {exc.strerror}") from exc
