"""The whole chain as one sequence of bytes: sealed segments, then ``events.jsonl``.

Positions (``Head.size``, the verified mark, rollup and index offsets) count
bytes of that concatenation, so a seal changes no position. A reader opens
``events.jsonl`` first and lists the sealed segments after: a seal renames its
segment into place before it empties ``events.jsonl``, so a reader either sees
the segment and a file that may still hold the same bytes (skipped: they are
recognised by the segment's first line), or the old file without the new
segment. Either way it sees every line once, without the lock.
"""

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ledger.edges.fileio import open_regular
from ledger.edges.files.segmentfiles import Segment, SegmentDir
from ledger.errors import ChainIOError

_FIRST_LINE_READ = 1 << 16


@dataclass(frozen=True, slots=True)
class ChainView:
    """One consistent view: the sealed segments and an open descriptor on the open one."""

    path: Path
    segments: tuple[Segment, ...]
    fd: int | None  # None: no ``events.jsonl`` yet
    open_size: int
    skip: int  # bytes at the start of the file that the newest segment already holds

    @property
    def base(self) -> int:
        """Where the open segment starts in the whole chain."""
        return self.segments[-1].end if self.segments else 0

    @property
    def size(self) -> int:
        """The whole chain's size in bytes."""
        return self.base + self.open_size - self.skip

    def close(self) -> None:
        """Release the open segment's descriptor."""
        if self.fd is not None:
            os.close(self.fd)


def open_view(path: Path, segments: SegmentDir | None, *, follow_symlinks: bool) -> ChainView:
    """The chain as it is now; the caller closes the view.

    Raises:
        ChainIOError: a file cannot be read, or the segments are out of order.
    """
    try:
        fd: int | None = open_regular(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        fd = None
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        size = os.fstat(fd).st_size if fd is not None else 0
        sealed = segments.listing() if segments is not None else ()
        skip = 0
        if fd is not None and sealed and already_sealed(fd, size, sealed[-1]):
            skip = sealed[-1].size
    except OSError as exc:
        if fd is not None:
            os.close(fd)
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    return ChainView(path, sealed, fd, size, skip)


def already_sealed(fd: int, size: int, newest: Segment) -> bool:
    """Whether the open file still begins with the newest sealed segment's bytes.

    Only a seal cut short (or still under way) leaves it so: the next
    segment's first line links to the sealed head, so it never equals the
    sealed segment's own first line.

    Raises:
        OSError: the file cannot be read.
    """
    if size < newest.size:
        return False
    first = first_line(fd)
    return hashlib.sha256(first).hexdigest() == newest.first_line_sha256


def first_line(fd: int) -> bytes:
    """The file's first line with its ``\\n`` (or what there is of it).

    Raises:
        OSError: the file cannot be read.
    """
    parts: list[bytes] = []
    position = 0
    while True:
        block = os.pread(fd, _FIRST_LINE_READ, position)
        if not block:
            return b"".join(parts)
        cut = block.find(b"\n")
        if cut != -1:
            parts.append(block[: cut + 1])
            return b"".join(parts)
        parts.append(block)
        position += len(block)


def view_lines(
    view: ChainView, segments: SegmentDir | None, start: int, end: int | None
) -> Iterator[bytes]:
    """Raw lines of the view from position ``start`` to ``end`` (to the file's end: ``None``).

    Raises:
        ChainIOError: a segment or the open file cannot be read.
    """
    for segment in view.segments:
        if segments is None or segment.end <= start or (end is not None and segment.start >= end):
            continue
        stop = segment.end if end is None else min(end, segment.end)
        offset = max(start, segment.start) - segment.start
        yield from _split(segments.read(segment, offset), stop - segment.start - offset)
    if view.fd is None or (end is not None and end <= view.base):
        return
    physical = max(start - view.base, 0) + view.skip
    limit = None if end is None else end - view.base + view.skip - physical
    yield from _file_lines(view, physical, limit)


def _split(blocks: Iterator[bytes], length: int) -> Iterator[bytes]:
    carry = b""
    for block in blocks:
        if length <= 0:
            break
        taken = block[:length]
        length -= len(taken)
        data = carry + taken if carry else taken
        begin = 0
        while True:
            cut = data.find(b"\n", begin)
            if cut == -1:
                break
            yield data[begin : cut + 1]
            begin = cut + 1
        carry = data[begin:]
    if carry:
        yield carry


def _file_lines(view: ChainView, start: int, limit: int | None) -> Iterator[bytes]:
    if view.fd is None:
        return
    handle = os.fdopen(os.dup(view.fd), "rb")
    with handle:
        try:
            handle.seek(start)
            remaining = limit
            while remaining is None or remaining > 0:
                line = handle.readline() if remaining is None else handle.readline(remaining)
                if not line:
                    return
                if remaining is not None:
                    remaining -= len(line)
                yield line
        except OSError as exc:
            raise ChainIOError(f"cannot read {view.path}: {exc.strerror}") from exc
