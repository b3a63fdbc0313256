"""Reading the chain line by line, without its lock (the chain is append-only).

The chain is its sealed segments (``segments/``, when the chain has any) and
then ``events.jsonl``; positions count bytes of the whole (``chainview``).
``ChainFile`` adds the lock and appends; verification (``chainverify``) needs
only this, so it reads the chain without depending on the writer's module.
"""

import errno
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from ledger.core.checkpoint import CheckpointError
from ledger.core.verified_mark import SealedStamp
from ledger.edges.fileio import open_regular
from ledger.edges.files.chainview import ChainView, open_view, view_lines
from ledger.edges.files.segmentfiles import SegmentDir, segment_from_document
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

    def sealed_stamps(self, end: int | None = None) -> tuple[SealedStamp, ...]:
        """Stamps of the sealed segments 1, 2, … that end at or before ``end`` (all: ``None``).

        A stamp is the segment file's identity (``os.stat``: device, inode,
        size, ``mtime_ns``, ``ctime_ns``) and its manifest's SHA-256, read
        afresh. The stamps stop at the first segment that cannot be stamped: its
        data cannot be found (archived, no archive given), or its manifest now
        says something else than the listing the chain is read through.

        Raises:
            ChainIOError: the segments cannot be listed.
        """
        if self.segments is None:
            return ()
        stamps: list[SealedStamp] = []
        for segment in self.segments.listing():
            if end is not None and segment.end > end:
                break
            manifest = self.segments.manifest_path(segment.number)
            try:
                info = os.stat(self.segments.data_path(segment))  # noqa: PTH116
                document = manifest.read_bytes()
                if segment_from_document(json.loads(document), str(manifest)) != segment:
                    break
            except (OSError, ValueError, ChainIOError, CheckpointError):
                break
            stamp = SealedStamp(
                number=segment.number,
                end=segment.end,
                device=info.st_dev,
                inode=info.st_ino,
                size=info.st_size,
                mtime_ns=info.st_mtime_ns,
                ctime_ns=info.st_ctime_ns,
                manifest_sha256=hashlib.sha256(document).hexdigest(),
            )
            stamps.append(stamp)
        return tuple(stamps)
