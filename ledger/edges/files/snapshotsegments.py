"""Snapshots' copies of sealed segments: ``snapshots/segments/NNNNNN-<sha>.jsonl.zst``.

A sealed segment never changes, so a snapshot copies it once: the copy is
named by the segment's number and its compressed bytes' hash, and every later
snapshot whose chain begins with the same segment names the same copy. A copy
is removed only when no snapshot's manifest names it any more (pruning), and
only while the home still holds the segment or another copy of it exists:
never the only copy of a segment.
"""

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from ledger.edges.fileio import copy_read_only, fsync_dir
from ledger.edges.files.segmentfiles import Segment, SegmentDir
from ledger.errors import ChainIOError, InputDataError

COPIES_DIR = "segments"
# A segment decompresses to at most this: a bomb must not exhaust memory.
_MAX_SEGMENT_BYTES = 8 << 30


def copy_name(segment: Segment) -> str:
    """The copy's name under the snapshot folder."""
    return f"{COPIES_DIR}/{segment.number:06d}-{segment.compressed_sha256[:16]}.jsonl.zst"


def copy_sealed(
    segments: SegmentDir, snapshots_dir: Path, up_to: int
) -> tuple[tuple[tuple[str, str], ...], int, tuple[Path, ...]]:
    """Copy each sealed segment that ends by position ``up_to`` unless a copy exists.

    Returns:
        ``(name, compressed SHA-256)`` of each segment the snapshot begins
        with, the position where the open part starts, and the copies made now.

    Raises:
        ChainIOError: a segment cannot be read or copied.
    """
    chosen = [segment for segment in segments.listing() if segment.end <= up_to]
    named = []
    made = []
    target_dir = snapshots_dir / COPIES_DIR
    for segment in chosen:
        name = copy_name(segment)
        target = snapshots_dir / name
        if not target.exists():
            _copy(segments.data_path(segment), target, segment.compressed_sha256)
            made.append(target)
        named.append((name, segment.compressed_sha256))
    if made:
        fsync_dir(target_dir)
    return tuple(named), chosen[-1].end if chosen else 0, tuple(made)


def _copy(source: Path, target: Path, digest: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        copy_read_only(source, target, digest)
    except OSError as exc:
        raise ChainIOError(f"cannot copy {source} to {target}: {exc.strerror}") from exc


def decompress_segment(data: bytes, source: str) -> bytes:
    """A segment copy's bytes.

    Raises:
        InputDataError: not zstd, or expanding past 8 GiB.
    """
    import zstandard

    try:
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        raw = reader.read(_MAX_SEGMENT_BYTES + 1)
    except zstandard.ZstdError as exc:
        raise InputDataError(f"{source} is not a valid zstd file: {exc}") from exc
    if len(raw) > _MAX_SEGMENT_BYTES:
        raise InputDataError(f"{source} expands beyond {_MAX_SEGMENT_BYTES} bytes")
    return raw


def remove_unnamed(snapshots_dir: Path, named: Iterable[str], home_has: set[str]) -> None:
    """Remove copies no manifest names, when the home still holds that segment.

    Args:
        snapshots_dir: the snapshot folder.
        named: the copies the remaining manifests name.
        home_has: the compressed SHA-256 of each segment the home still holds.
    """
    kept = set(named)
    folder = snapshots_dir / COPIES_DIR
    try:
        names = os.listdir(folder)  # noqa: PTH208
    except OSError:
        return
    for name in names:
        relative = f"{COPIES_DIR}/{name}"
        if relative in kept or not name.endswith(".jsonl.zst"):
            continue
        path = folder / name
        prefix = name.split("-", 1)[-1].removesuffix(".jsonl.zst")
        if not any(digest.startswith(prefix) for digest in home_has):
            continue  # maybe the only copy left (the segment was archived): keep it
        with contextlib.suppress(OSError):
            path.unlink()
