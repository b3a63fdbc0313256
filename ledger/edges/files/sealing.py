"""Sealing the open segment: ``events.jsonl`` becomes ``segments/NNNNNN.jsonl.zst``.

A writer that appended under the chain lock checks whether the open segment
holds ``chain.segment_entries`` entries (or its first entry is
``chain.segment_days`` older than its newest) (``seal_due``). If so, once the
lock is let go, the first bytes of the open file, up to that head, are
compressed into a temporary segment file and fsync'd: they never change, so
other writers go on appending after them meanwhile (``seal``). Then, under the
lock a moment, the file is renamed into place, the segment's manifest is
written with a signed checkpoint of its head (from here on the segment is
sealed), and ``events.jsonl`` is replaced by a file holding only the lines
appended since. The next entry links to the sealed head as it would have anyway.

Every step is safe to cut short: before the manifest exists the chain is as
it was (a stray segment file is removed by the next seal); after it, an
``events.jsonl`` that still begins with the sealed bytes is recognised by every
reader (``chainview``) and cut by the next writer (``finish_interrupted_seal``).
Nothing is lost and nothing is counted twice. Two writers that decide to seal
at once both compress; the first to commit wins, the other gives up.
"""

import contextlib
import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ledger.core.checkpoint import make_checkpoint
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.timefmt import parse_ts
from ledger.edges.fileio import atomic_write, identity_of_stat, open_regular
from ledger.edges.files.chainview import already_sealed, first_line
from ledger.edges.files.segmentfiles import Frames, Segment, SegmentDir
from ledger.errors import ChainIOError

if TYPE_CHECKING:
    from ledger.core.signing import Signer

# No entry is shorter than this many bytes (its required fields alone are
# longer), so an open segment smaller than ``entries`` times it need not be counted.
MIN_ENTRY_BYTES = 100
# The count of the open segment's entries is kept beside the segments once this
# many bytes more were counted, so a process counts only what was appended since.
_COUNT_SAVE_BYTES = 64 << 10
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
    newest = segments.newest()
    if newest is None:
        return
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


@dataclass(frozen=True, slots=True)
class PendingSeal:
    """A seal decided under the lock: the open file's first ``size`` bytes, up to ``head``."""

    inode: tuple[int, int]
    size: int
    entry_hash: str
    ts_utc: str
    event_type: str
    after: int  # the newest sealed segment's number then (0: none)


def seal_due(
    path: Path, segments: SegmentDir, limits: SegmentLimits, head: "HeadFacts"
) -> PendingSeal | None:
    """Whether the open segment reached a limit; what to seal, or ``None``.

    Call it holding the chain lock, after the appends; ``head`` is the chain's
    head, the last line of the bytes to seal.

    Raises:
        ChainIOError: a file cannot be read.
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
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    sealed = segments.listing()
    return PendingSeal(
        (info.st_dev, info.st_ino), info.st_size, head.entry_hash, head.ts_utc, head.event_type,
        sealed[-1].number if sealed else 0,
    )  # fmt: skip


def seal(
    path: Path,
    segments: SegmentDir,
    pending: PendingSeal,
    signer: "Signer",
    locked: Callable[[], AbstractContextManager[object]],
) -> Segment | None:
    """Carry out a seal: compress without the lock, then take ``locked`` a moment to commit.

    The bytes to seal never change (the chain is append-only), so they are
    compressed while other writers go on appending after them. Under the lock
    the seal goes ahead only if nobody sealed or replaced the file meanwhile;
    the lines appended since move to the new, otherwise empty, open segment.

    Returns:
        The sealed segment, or ``None`` when another writer was first.

    Raises:
        ChainIOError: a file cannot be read or written (the chain is left whole).
        LockTimeoutError: the lock stayed busy (nothing was sealed).
    """
    try:
        fd = open_regular(path)
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    temporary: Path | None = None
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != pending.inode or info.st_size < pending.size:
            return None
        number = pending.after + 1
        temporary, compressed_sha256, frames = segments.write_data(number, fd, pending.size)
        scan = _scan(fd, pending.size)
        with locked():
            return _commit(
                path, fd, segments, pending, signer, (temporary, compressed_sha256, frames), scan
            )
    except OSError as exc:
        raise ChainIOError(f"cannot seal {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
        if temporary is not None:
            with contextlib.suppress(OSError):
                temporary.unlink()


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
    # The first line tells a new file apart from an old one whose inode it reuses.
    first = int(hashlib.sha256(first_line(fd)).hexdigest()[:15], 16)
    mine = [identity[0], identity[1]]
    start, entries = 0, 0
    kept = _COUNTED.get(identity[:2]) or _load_count(segments)
    if kept is not None and kept[:2] == mine and kept[4] == first and kept[2] <= info.st_size:
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
    _COUNTED[identity[:2]] = [*mine, counted, entries, first]
    if counted - start >= _COUNT_SAVE_BYTES:
        _save_count(segments, [*mine, counted, entries, first])
    return entries


# What this process counted last in each open file (a resident writer counts
# only what was appended since); checked against the file's size as the hint is.
_COUNTED: dict[tuple[int, int], list[int]] = {}


def _load_count(segments: SegmentDir) -> list[int] | None:
    try:
        value = json.loads((segments.directory / _COUNT_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    if isinstance(value, list) and len(value) == 5 and all(isinstance(v, int) for v in value):  # noqa: PLR2004
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


def _commit(
    path: Path,
    fd: int,
    segments: SegmentDir,
    pending: PendingSeal,
    signer: "Signer",
    data: tuple[Path, str, Frames],
    scan: "_Scan",
) -> Segment | None:
    """Under the lock: place the segment, write its manifest, start the new open segment."""
    sealed = segments.listing()
    previous = sealed[-1] if sealed else None
    now = os.stat(path)  # noqa: PTH116
    if (previous.number if previous else 0) != pending.after or (
        (now.st_dev, now.st_ino) != pending.inode
    ):
        return None  # another writer sealed, or a recover replaced the file
    chain_id = previous.checkpoint.chain_id if previous else scan.first_hash
    if chain_id is None:
        return None
    temporary, compressed_sha256, frames = data
    segments.remove_leftovers(keep=temporary)
    number = pending.after + 1
    segments.place_data(temporary, number)
    entries = (previous.checkpoint.entries if previous else 0) + scan.entries
    checkpoint = make_checkpoint(signer, chain_id, entries, pending.entry_hash, pending.ts_utc)
    segment = Segment(
        number=number,
        start=previous.end if previous else 0,
        size=pending.size,
        first_line=previous.first_line + previous.lines if previous else 1,
        lines=scan.lines,
        entries=scan.entries,
        first_ts=scan.first_ts or pending.ts_utc,
        last_ts=pending.ts_utc,
        last_event_type=pending.event_type,
        first_line_sha256=scan.first_line_sha256,
        compressed_sha256=compressed_sha256,
        frames=frames,
        checkpoint=checkpoint,
    )
    segments.write_manifest(segment)
    # The lines appended while it was compressed start the new open segment.
    rest = os.pread(fd, max(now.st_size - pending.size, 0), pending.size)
    atomic_write(path, rest, now.st_mode & 0o777)
    _forget_count(segments)
    return segment


@dataclass(frozen=True, slots=True)
class _Scan:
    lines: int
    entries: int
    first_line_sha256: str
    first_hash: str | None
    first_ts: str | None


def _scan(fd: int, size: int) -> _Scan:
    """Count the lines and entries of the file's first ``size`` bytes; read its first entry."""
    first = first_line(fd)
    first_hash = first_ts = None
    lines = entries = 0
    with os.fdopen(os.dup(fd), "rb") as handle:
        handle.seek(0)
        left = size
        while left > 0:
            raw = handle.readline(left)
            if not raw:
                break
            left -= len(raw)
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
