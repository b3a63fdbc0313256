"""Reading ``events.jsonl`` line by line, without its lock (the chain is append-only).

``ChainFile`` adds the lock and appends; verification (``chainverify``) needs
only this, so it reads the file without depending on the writer's module.
"""

import os
from collections.abc import Iterator
from pathlib import Path

from ledger.edges.fileio import open_regular
from ledger.errors import ChainIOError


class ChainLines:
    """The chain file's lines, read through non-blocking, checked opens."""

    def __init__(self, path: Path, *, follow_symlinks: bool = False) -> None:
        self.path = path
        self.follow_symlinks = follow_symlinks

    def open_read(self) -> int:
        """A read-only descriptor on the chain file; the caller closes it.

        Raises:
            ChainIOError: the file cannot be opened, or is not a regular file.
        """
        try:
            return open_regular(self.path, follow_symlinks=self.follow_symlinks)
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.path}: {exc.strerror}") from exc

    def iter_lines(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Raw lines (each with its ``\\n`` unless torn) from byte ``start`` to ``end``.

        Raises:
            ChainIOError: the file cannot be read.
        """
        handle = os.fdopen(self.open_read(), "rb")
        with handle:
            try:
                handle.seek(start)
                remaining = None if end is None else end - start
                while remaining is None or remaining > 0:
                    line = handle.readline() if remaining is None else handle.readline(remaining)
                    if not line:
                        return
                    if remaining is not None:
                        remaining -= len(line)
                    yield line
            except OSError as exc:
                raise ChainIOError(f"cannot read {self.path}: {exc.strerror}") from exc
