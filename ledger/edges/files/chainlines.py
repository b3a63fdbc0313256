"""Reading the chain line by line, without its lock (the chain is append-only).

The chain is its sealed segments (``segments/``, when the chain has any) and
then ``events.jsonl``; positions count bytes of the whole (``chainview``).
``ChainFile`` adds the lock and appends; verification (``chainverify``) needs
only this, so it reads the chain without depending on the writer's module.
"""

import errno
import os
from collections.abc import Iterator
from pathlib import Path

from ledger.edges.fileio import open_regular
from ledger.edges.files.chainview import ChainView, open_view, view_lines
from ledger.edges.files.segmentfiles import SegmentDir
from ledger.errors import ChainIOError


class ChainLines:
    """The chain's lines, read through non-blocking, checked opens."""

    def __init__(
        self, path: Path, *, follow_symlinks: bool = False, segments: SegmentDir | None = None
    ) -> None:
        self.path = path
        self.follow_symlinks = follow_symlinks
        self.segments = segments

    def open_read(self) -> int:
        """A read-only descriptor on the open segment (``events.jsonl``); the caller closes it.

        Raises:
            ChainIOError: the file cannot be opened, or is not a regular file.
        """
        try:
            return open_regular(self.path, follow_symlinks=self.follow_symlinks)
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.path}: {exc.strerror}") from exc

    def view(self) -> ChainView:
        """The whole chain as it is now (close it after use).

        Raises:
            ChainIOError: a file cannot be read.
        """
        if self.segments is None:
            try:
                fd = open_regular(self.path, follow_symlinks=self.follow_symlinks)
            except OSError as exc:
                raise ChainIOError(f"cannot read {self.path}: {exc.strerror}") from exc
            return ChainView(self.path, (), fd, os.fstat(fd).st_size, 0)
        view = open_view(self.path, self.segments, follow_symlinks=self.follow_symlinks)
        if view.fd is None and not view.segments:
            raise ChainIOError(f"cannot read {self.path}: {os.strerror(errno.ENOENT)}")
        return view

    def iter_lines(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Raw lines (each with its ``\\n`` unless torn) from position ``start`` to ``end``.

        Raises:
            ChainIOError: the chain cannot be read.
        """
        view = self.view()
        try:
            yield from view_lines(view, self.segments, start, end)
        finally:
            view.close()
