"""Sealing the open segment: ``events.jsonl`` becomes ``segments/NNNNNN.jsonl.zst``.

Under the chain lock, once the open segment holds ``chain.segment_entries``
entries (or its first entry is ``chain.segment_days`` older than its newest),
its bytes are compressed into the next segment file (fsync'd, renamed into
place), the segment's manifest is written with a signed checkpoint of its head
(from here on the segment is sealed), and ``events.jsonl`` is replaced by an
empty file. The next entry links to the sealed head as it would have anyway.

Every step is safe to cut short: before the manifest exists the chain is as
it was (a stray segment file is removed or overwritten by the next seal);
after it, an ``events.jsonl`` that still begins with the sealed bytes is
recognised by every reader (``chainview``) and emptied by the next writer
(``finish_interrupted_seal``). Nothing is lost and nothing is counted twice.
"""

import contextlib
import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ledger.core.checkpoint import make_checkpoint
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.timefmt import parse_ts
from ledger.edges.fileio import atomic_write, identity_of_stat, open_regular
from ledger.edges.files.chainview import already_sealed, first_line
from ledger.edges.files.segmentfiles import Segment, SegmentDir
from ledger.errors import ChainIOError

if TYPE_CHECKING:
    from ledger.core.signing import Signer

# No entry is shorter than this many bytes (its required fields alone are
# longer), so an open segment smaller than ``entries`` times it need not be counted.
MIN_ENTRY_BYTES = 100
# The count of the open segment's entries is kept beside the segments once this
# many bytes more were counted, so a process counts only what was appended since.
_COUNT_SAVE_BYTES = 1 << 20
_COUNT_FILE = "open-count.json"
_READ = 1 << 20


class HeadFacts(Protocol):
    """What a seal needs of the chain's head (``ChainHead`` has it)."""

    @property
    def entry_hash(self) -> str:
        """The head's hash."""
        ...

    @property
    def ts_utc(self) -> str:
        """Its sealed time."""
        ...

    @property
    def event_type(self) -> str:
        """Its event type."""
        ...


@dataclass(frozen=True, slots=True)
class SegmentLimits:
    """When the open segment is sealed (``chain.segment_entries``, ``chain.segment_days``)."""

    entries: int = 1_000_000
    days: int | None = None


def finish_interrupted_seal(path: Path, segments: SegmentDir) -> None:
    """Empty an ``events.jsonl`` whose bytes the newest segment already holds.

    Call it holding the chain lock. Bytes after the sealed ones (none, unless
    an older writer appended before this check existed) stay in the file.

    Raises:
        ChainIOError: the file cannot be read or replaced.
    """
    sealed = segments.listing()
    if not sealed:
        return
    newest = sealed[-1]
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not already_sealed(fd, info.st_size, newest):
            return
        rest = os.pread(fd, info.st_size - newest.size, newest.size)
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    atomic_write(path, rest, info.st_mode & 0o777)
    _forget_count(segments)


def seal_if_due(
    path: Path, segments: SegmentDir, limits: SegmentLimits, head: "HeadFacts", signer: "Signer"
) -> Segment | None:
    """Seal the open segment if it reached a limit; the new segment, or ``None``.

    Call it holding the chain lock, after the appends are durable. ``head`` is
    the chain's head (what the segment's checkpoint seals).

    Raises:
        ChainIOError: a file cannot be read or written (the chain is left whole).
    """
    finish_interrupted_seal(path, segments)
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if info.st_size == 0 or not _due(fd, info, segments, limits, head):
            return None
        return _seal(path, fd, info, segments, head, signer)
    except OSError as exc:
        raise ChainIOError(f"cannot seal {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def _due(
    fd: int, info: os.stat_result, segments: SegmentDir, limits: SegmentLimits, head: "HeadFacts"
) -> bool:
    if limits.days is not None:
        first = _first_entry(fd)
        if first is not None:
            age = parse_ts(head.ts_utc) - parse_ts(str(first["ts_utc"]))
            if age >= dt.timedelta(days=limits.days):
                return True
    if info.st_size < limits.entries * MIN_ENTRY_BYTES:
        return False
    return _count_entries(fd, info, segments) >= limits.entries


def _first_entry(fd: int) -> dict[str, object] | None:
    line = first_line(fd)
    if not line.endswith(b"\n") or line.startswith(b"["):
        return None
    try:
        return parse_line(line[:-1]).entry
    except EnvelopeFormatError:
        return None


def _count_entries(fd: int, info: os.stat_result, segments: SegmentDir) -> int:
    """Entries (lines that are not markers) in the open file, counting only what is new."""
    identity = identity_of_stat(info)
    start, entries = 0, 0
    kept = _load_count(segments)
    if kept is not None and kept[:2] == list(identity[:2]) and kept[2] <= info.st_size:
        start, entries = kept[2], kept[3]
    counted, previous = start, b"\n"
    if start:
        previous = os.pread(fd, 1, start - 1)
    while counted < info.st_size:
        block = os.pread(fd, min(_READ, info.st_size - counted), counted)
        if not block:
            break
        newlines = block.count(b"\n")
        markers = block.count(b"\n[") + (1 if previous == b"\n" and block[:1] == b"[" else 0)
        entries += newlines - markers
        previous = block[-1:]
        counted += len(block)
    if counted - start >= _COUNT_SAVE_BYTES:
        _save_count(segments, [identity[0], identity[1], counted, entries])
    return entries


def _load_count(segments: SegmentDir) -> list[int] | None:
    try:
        value = json.loads((segments.directory / _COUNT_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    if isinstance(value, list) and len(value) == 4 and all(isinstance(v, int) for v in value):  # noqa: PLR2004
        return value
    return None


def _save_count(segments: SegmentDir, value: list[int]) -> None:
    # A hint only (checked against the file's inode and size): not fsync'd.
    with contextlib.suppress(ChainIOError, OSError):
        segments.directory.mkdir(mode=0o755, exist_ok=True)
        atomic_write(segments.directory / _COUNT_FILE, json.dumps(value).encode(), durable=False)


def _forget_count(segments: SegmentDir) -> None:
    with contextlib.suppress(OSError):
        (segments.directory / _COUNT_FILE).unlink()


def _seal(
    path: Path,
    fd: int,
    info: os.stat_result,
    segments: SegmentDir,
    head: "HeadFacts",
    signer: "Signer",
) -> Segment:
    sealed = segments.listing()
    previous = sealed[-1] if sealed else None
    scan = _scan(fd)
    chain_id = previous.checkpoint.chain_id if previous else scan.first_hash
    if chain_id is None:
        raise ChainIOError(f"{path}: no entry to seal")
    entries_before = previous.checkpoint.entries if previous else 0
    number = previous.number + 1 if previous else 1
    segments.remove_leftovers()
    compressed_sha256, frames = segments.write_data(number, fd, info.st_size)
    checkpoint = make_checkpoint(
        signer, chain_id, entries_before + scan.entries, head.entry_hash, head.ts_utc
    )
    segment = Segment(
        number=number,
        start=previous.end if previous else 0,
        size=info.st_size,
        first_line=previous.first_line + previous.lines if previous else 1,
        lines=scan.lines,
        entries=scan.entries,
        first_ts=scan.first_ts or head.ts_utc,
        last_ts=head.ts_utc,
        last_event_type=head.event_type,
        first_line_sha256=scan.first_line_sha256,
        compressed_sha256=compressed_sha256,
        frames=frames,
        checkpoint=checkpoint,
    )
    segments.write_manifest(segment)
    atomic_write(path, b"", info.st_mode & 0o777)
    _forget_count(segments)
    return segment


@dataclass(frozen=True, slots=True)
class _Scan:
    lines: int
    entries: int
    first_line_sha256: str
    first_hash: str | None
    first_ts: str | None


def _scan(fd: int) -> _Scan:
    """Count the open file's lines and entries and read its first entry."""
    import hashlib

    first = first_line(fd)
    first_hash = first_ts = None
    with os.fdopen(os.dup(fd), "rb") as handle:
        handle.seek(0)
        lines = entries = 0
        for raw in handle:
            lines += 1
            if raw.startswith(b"["):
                continue
            entries += 1
            if first_hash is None:
                try:
                    parsed = parse_line(raw.rstrip(b"\n"))
                except EnvelopeFormatError:
                    continue
                first_hash, first_ts = parsed.entry_hash, parsed.ts_utc
    return _Scan(lines, entries, hashlib.sha256(first).hexdigest(), first_hash, first_ts)
