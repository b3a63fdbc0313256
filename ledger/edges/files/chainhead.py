"""The chain's head: its last entry, read backwards from the end of the open segment.

Reading the tail costs the same at any chain length. A torn last line is
reported, never repaired here: ``ledger recover`` owns repairs. With sealed
segments the head's ``size`` counts their bytes too (``chain_head``).
"""

import hashlib
import os
import stat
from pathlib import Path
from typing import NamedTuple

from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.edges.fileio import FileIdentity, identity_of_stat, open_regular
from ledger.edges.files.chainview import first_line
from ledger.edges.files.segmentfiles import SegmentDir
from ledger.errors import ChainIOError, TornTailError

_TAIL_READ = 8192


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256."""
    return hashlib.sha256(data).hexdigest()


class CorruptTailError(ChainIOError):
    """The last line is complete but not a valid entry; nothing may follow it."""


class ChainHead(NamedTuple):
    """What an append needs to know of the chain: its last entry and its size."""

    entry_hash: str
    ts_utc: str
    size: int
    event_type: str


def read_last_line(fd: int, size: int) -> tuple[bytes, int]:
    """The last line of a file (with its ``\\n``) and the offset where it starts."""
    end = size
    chunks: list[bytes] = []
    position = end
    while position > 0:
        step = min(_TAIL_READ, position)
        position -= step
        block = os.pread(fd, step, position)
        search_end = len(block) - 1 if not chunks else len(block)
        cut = block.rfind(b"\n", 0, search_end)
        if cut != -1:
            chunks.append(block[cut + 1 :])
            return b"".join(reversed(chunks)), position + cut + 1
        chunks.append(block)
    return b"".join(reversed(chunks)), 0


def read_head(path: Path, *, follow_symlinks: bool = False) -> ChainHead | None:
    """The last entry of one file (its own size as ``size``), read backwards from the end.

    Raises:
        TornTailError: the last line has no newline.
        CorruptTailError: the last line is not a valid entry.
        ChainIOError: the file cannot be read, or is not a regular file.
    """
    return read_head_and_first(path, follow_symlinks=follow_symlinks, want_first=False)[0]


def read_head_and_first(
    path: Path, *, follow_symlinks: bool, want_first: bool
) -> tuple[ChainHead | None, str | None]:
    """``read_head``, and with ``want_first`` the SHA-256 of the same file's first line.

    Both come from one open file (or one remembered identity), so a seal
    that replaces the file meanwhile never mixes two files' answers.

    Raises:
        TornTailError, CorruptTailError, ChainIOError: as ``read_head``.
    """
    remembered = _known_head(path, follow_symlinks=follow_symlinks)
    if remembered is not None and (remembered[1] is not None or not want_first):
        return remembered
    try:
        fd = open_regular(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        found = identity_of_stat(os.fstat(fd))
        size = found[2]
        if size == 0:
            return None, None
        line, start = read_last_line(fd, size)
        first = None
        if start == 0:
            first = sha256_hex(line)
        elif want_first:
            first = sha256_hex(first_line(fd))
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if not line.endswith(b"\n"):
        raise TornTailError(str(path))
    try:
        parsed = parse_line(line[:-1])
    except EnvelopeFormatError as exc:
        raise CorruptTailError(
            f"{path}: last line is not a valid entry ({exc}); run `ledger recover`"
        ) from exc
    head = ChainHead(parsed.entry_hash, parsed.ts_utc, size, parsed.event_type)
    _KNOWN_HEADS[found[:2]] = (found, head, first)
    return head, first


# The head last read or written in each chain file this process touched, so a
# long-lived writer (``ledger serve``, a Python API user) does not parse the
# last line again when nothing else has written since.
# Keyed by device and inode; the whole identity must match (``identity_of_stat``).
# With the head, the SHA-256 of the file's first line when it was read.
_KNOWN_HEADS: dict[tuple[int, ...], tuple[FileIdentity, ChainHead, str | None]] = {}


def _known_head(path: Path, *, follow_symlinks: bool) -> tuple[ChainHead, str | None] | None:
    """The remembered head and first line's hash, when one ``stat`` shows the file unchanged."""
    if not _KNOWN_HEADS:
        return None
    try:
        info = path.stat(follow_symlinks=follow_symlinks)
    except OSError:
        return None  # the open that follows reports it
    if not stat.S_ISREG(info.st_mode):
        return None
    found = identity_of_stat(info)
    known = _KNOWN_HEADS.get(found[:2])
    return (known[1], known[2]) if known is not None and known[0] == found and found[2] else None


def chain_head(
    path: Path, segments: SegmentDir | None, *, follow_symlinks: bool = False
) -> ChainHead | None:
    """The whole chain's last entry: ``size`` counts the sealed segments' bytes too.

    An empty open segment's head is the newest sealed segment's; an open file
    that still begins with that segment's bytes (a seal cut short or under way)
    counts them once. The file is read before the segments are listed
    (``chainview``), so a seal meanwhile is seen whole or not at all.

    Raises:
        TornTailError: the last line has no newline.
        CorruptTailError: the last line is not a valid entry.
        ChainIOError: a file cannot be read.
    """
    if segments is None:
        return read_head(path, follow_symlinks=follow_symlinks)
    physical, first = read_head_and_first(path, follow_symlinks=follow_symlinks, want_first=True)
    newest = segments.newest()
    if newest is None:
        return physical
    skip = 0
    if physical is not None and physical.size >= newest.size and first == newest.first_line_sha256:
        skip = newest.size
    if physical is None or physical.size == skip:
        return ChainHead(
            newest.checkpoint.head_hash, newest.last_ts, newest.end, newest.last_event_type
        )
    return physical._replace(size=newest.end + physical.size - skip)


def remember_head(found: FileIdentity, head: ChainHead, start: int, line: bytes) -> None:
    """Keep the open file's head after an append of ``line`` at its own offset ``start``."""
    known = _KNOWN_HEADS.get(found[:2])
    first = sha256_hex(line) if start == 0 else (known[2] if known else None)
    _KNOWN_HEADS[found[:2]] = (found, head._replace(size=found[2]), first)
