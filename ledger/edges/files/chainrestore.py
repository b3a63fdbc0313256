"""The whole chain as bytes for ``ledger recover``, and which sealed segments it keeps.

Recovery reads the chain whole (the sealed segments, then ``events.jsonl``)
and writes back the longest prefix that verifies. The sealed segments that
prefix begins with unchanged stay as they are; a segment from the first one
that differs on leaves for ``evidence/`` and its lines, if kept, go back into
the open segment, to be sealed again by the next writer.
"""

import hashlib

from ledger.edges.files.segmentfiles import Segment, SegmentDir, SegmentGapError


def sealed_run(segments: SegmentDir | None) -> tuple[Segment, ...]:
    """The sealed segments that follow each other from the first (up to a gap).

    Raises:
        ChainIOError: the directory or a manifest cannot be read.
    """
    if segments is None:
        return ()
    try:
        return segments.listing()
    except SegmentGapError as exc:
        return tuple(s for s in segments.loose() if s.first_line < exc.line)


def whole_chain(
    segments: SegmentDir, sealed: tuple[Segment, ...], open_part: bytes | None
) -> bytes:
    """The sealed segments' bytes, then the open segment's.

    A seal cut short may have left the newest segment's bytes at the start of
    ``events.jsonl`` too; they count once.

    Raises:
        ChainIOError: a segment cannot be read.
    """
    parts = [b"".join(segments.read(segment)) for segment in sealed]
    if parts and open_part is not None and _starts_with_copy(open_part, parts[-1]):
        open_part = open_part[len(parts[-1]) :]
    return b"".join(parts) + (open_part or b"")


def _starts_with_copy(data: bytes, sealed: bytes) -> bool:
    first = sealed[: sealed.find(b"\n") + 1]
    return data.startswith(sealed) and data[: len(first)] == first


def segments_kept(segments: SegmentDir, sealed: tuple[Segment, ...], data: bytes) -> int:
    """How many sealed segments ``data`` (a recovered chain) begins with, byte for byte.

    Raises:
        ChainIOError: a segment cannot be read.
    """
    kept = 0
    for segment in sealed:
        if segment.end > len(data):
            break
        held = hashlib.sha256(b"".join(segments.read(segment))).digest()
        if hashlib.sha256(data[segment.start : segment.end]).digest() != held:
            break
        kept += 1
    return kept
