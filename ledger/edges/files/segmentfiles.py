"""Sealed chain segments: ``segments/NNNNNN.jsonl.zst`` and their manifests (SPEC §21).

A sealed segment is the bytes ``events.jsonl`` held when it was sealed,
compressed with zstd in independent frames of about ``FRAME_BYTES`` each: the
file is an ordinary zstd stream (``zstd -d`` reads it), and a reader that wants
the line at one position decompresses only the frame that holds it. Beside it,
``NNNNNN.json`` is the segment's manifest: where the segment sits in the whole
chain (its first byte and line), what it holds, the frame table, and the signed
checkpoint of its head that seals it. A segment exists once its manifest does;
both are written once and never rewritten.
"""

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.core.canonical import canonical_bytes
from ledger.core.checkpoint import Checkpoint, CheckpointError, checkpoint_from_document
from ledger.edges.fileio import (
    ByIdentity,
    FileIdentity,
    atomic_write,
    fsync_dir,
    identity_of_stat,
)
from ledger.errors import ChainIOError

SEGMENT_FORMAT = "ledger-segment/1"
ARCHIVE_PREFIX = "archive-"
FRAME_BYTES = 1 << 20
_MANIFEST = re.compile(r"(\d{6})\.json")
_READ = 1 << 16
# Where each frame starts: (uncompressed offset, compressed offset).
Frames = tuple[tuple[int, int], ...]
_COUNTS = ("segment", "start", "size", "first_line", "lines", "entries")


class SegmentGapError(ChainIOError):
    """A sealed segment's manifest is missing or out of place; ``line`` is where."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True, slots=True)
class Segment:
    """One sealed segment as its manifest describes it."""

    number: int
    start: int  # the segment's first byte in the whole chain
    size: int  # its uncompressed bytes
    first_line: int  # the whole chain's line number of its first line
    lines: int
    entries: int
    first_ts: str
    last_ts: str
    last_event_type: str
    first_line_sha256: str
    compressed_sha256: str
    frames: "Frames"  # (uncompressed, compressed) offset of each frame
    checkpoint: Checkpoint

    @property
    def end(self) -> int:
        """The whole chain's position just after the segment."""
        return self.start + self.size

    @property
    def name(self) -> str:
        """The compressed file's name."""
        return f"{self.number:06d}.jsonl.zst"

    def to_document(self) -> dict[str, Any]:
        """The manifest as stored."""
        return {
            "format": SEGMENT_FORMAT,
            "segment": self.number,
            "start": self.start,
            "size": self.size,
            "first_line": self.first_line,
            "lines": self.lines,
            "entries": self.entries,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "last_event_type": self.last_event_type,
            "first_line_sha256": self.first_line_sha256,
            "compressed_sha256": self.compressed_sha256,
            "frames": [list(frame) for frame in self.frames],
            "checkpoint": self.checkpoint.to_document(),
        }


def segment_from_document(document: Any, source: str) -> Segment:
    """A manifest read back (its checkpoint's signature is checked by the verifier).

    Raises:
        ChainIOError: the manifest is malformed.
    """
    try:
        if document["format"] != SEGMENT_FORMAT:
            raise ChainIOError(f"{source}: not a {SEGMENT_FORMAT} manifest")
        counts = {key: document[key] for key in _COUNTS}
        if not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()
        ):
            raise ChainIOError(f"{source}: counts must be integers ≥ 0")
        return Segment(
            number=counts["segment"],
            start=counts["start"],
            size=counts["size"],
            first_line=counts["first_line"],
            lines=counts["lines"],
            entries=counts["entries"],
            first_ts=str(document["first_ts"]),
            last_ts=str(document["last_ts"]),
            last_event_type=str(document["last_event_type"]),
            first_line_sha256=str(document["first_line_sha256"]),
            compressed_sha256=str(document["compressed_sha256"]),
            frames=tuple((int(u), int(c)) for u, c in document["frames"]),
            checkpoint=checkpoint_from_document(document["checkpoint"], source),
        )
    except (ChainIOError, CheckpointError):
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ChainIOError(f"{source}: malformed segment manifest: {exc}") from exc


class SegmentDir:
    """The sealed segments beside a chain file.

    ``archive`` is a folder ``ledger archive`` moved segments to (given by the
    reader); without it an archived segment is read from the folder its
    archive manifest names, when that can be read.
    """

    def __init__(self, directory: Path, archive: Path | None = None) -> None:
        self.directory = directory
        self.archive = archive

    def listing(self) -> tuple[Segment, ...]:
        """Every sealed segment, in order; empty when there is none.

        Remembered by the directory's identity: a seal or an archive adds or
        removes names, which changes it.

        Raises:
            ChainIOError: the directory or a manifest cannot be read, or the
                manifests do not follow each other.
        """
        identity = self._identity()
        if identity is None:
            return ()
        known = _LISTINGS.get(identity)
        if known is not None:
            return known
        segments = self.loose()
        _check_sequence(segments, self.directory)
        _LISTINGS.keep(segments, identity)
        return segments

    def newest(self) -> Segment | None:
        """The newest sealed segment, reading its manifest alone; ``None`` when there is none.

        What the chain's head needs, on every call: a listing parses every
        manifest, which grows with the chain (a segment a day is 365 a year).
        The names are still held to one another, so a manifest removed from the
        middle is found here as by ``listing`` (which then names the gap); where
        each segment sits is checked by ``listing``, which every reader of
        sealed bytes uses.

        Raises:
            ChainIOError: the directory or the manifest cannot be read, or a
                manifest is missing.
        """
        identity = self._identity()
        if identity is None:
            return None
        listed = _LISTINGS.get(identity)
        if listed is not None:
            return listed[-1] if listed else None
        known = _NEWEST.get(identity)
        if known is not None:
            return known
        names = self._manifest_names()
        if not names:
            return None
        newest = self.load(self.directory / names[-1])
        if names != [f"{n:06d}.json" for n in range(1, len(names) + 1)] or newest.number != len(
            names
        ):
            return self.listing()[-1]  # names where each gap is, with its line
        _NEWEST.keep(newest, identity)
        return newest

    def _identity(self) -> FileIdentity | None:
        """The folder's identity now (what listings are remembered by); ``None``: no folder."""
        try:
            return identity_of_stat(os.stat(self.directory))  # noqa: PTH116
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.directory}: {exc.strerror}") from exc

    def _manifest_names(self) -> list[str]:
        try:
            return sorted(n for n in os.listdir(self.directory) if _MANIFEST.fullmatch(n))  # noqa: PTH208
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.directory}: {exc.strerror}") from exc

    def loose(self) -> tuple[Segment, ...]:
        """Every manifest there is, by number, whether or not they follow each other.

        Raises:
            ChainIOError: the directory or a manifest cannot be read.
        """
        return tuple(self.load(self.directory / name) for name in self._manifest_names())

    def load(self, path: Path) -> Segment:
        """One manifest.

        Raises:
            ChainIOError: unreadable or malformed.
        """
        try:
            document = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise ChainIOError(f"cannot read segment manifest {path}: {exc}") from exc
        return segment_from_document(document, str(path))

    def data_path(self, segment: Segment) -> Path:
        """Where a segment's compressed bytes are: the home, else where it was archived."""
        home = self.directory / segment.name
        if home.exists():
            return home
        for folder in (self.archive, *self.archive_folders()):
            if folder is not None and (folder / segment.name).exists():
                return folder / segment.name
        return home

    def is_away(self, segment: Segment) -> bool:
        """Whether the segment was archived and no folder holding it can be read."""
        return not self.data_path(segment).exists()

    def archive_folders(self) -> list[Path]:
        """The folders the home's archive manifests (``archive-*.json``) name."""
        folders = []
        for path in sorted(self.directory.glob(f"{ARCHIVE_PREFIX}*.json")):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                folders.append(Path(json.loads(path.read_bytes())["to"]))
        return folders

    def manifest_path(self, number: int) -> Path:
        """Where segment ``number``'s manifest is."""
        return self.directory / f"{number:06d}.json"

    def read(self, segment: Segment, offset: int = 0) -> Iterator[bytes]:
        """The segment's uncompressed bytes from ``offset`` (inside it), in blocks.

        Only the frames from the one holding ``offset`` are decompressed.

        Raises:
            ChainIOError: the file is missing, unreadable or not zstd.
        """
        import zstandard

        index = 0
        for i, (uncompressed, _compressed) in enumerate(segment.frames):
            if uncompressed <= offset:
                index = i
        skip_to, seek = segment.frames[index] if segment.frames else (0, 0)
        path = self.data_path(segment)
        try:
            with path.open("rb") as handle:
                handle.seek(seek)
                reader = zstandard.ZstdDecompressor().stream_reader(handle, read_across_frames=True)
                skip = offset - skip_to
                while True:
                    block = reader.read(_READ)
                    if not block:
                        return
                    if skip >= len(block):
                        skip -= len(block)
                        continue
                    yield block[skip:]
                    skip = 0
        except OSError as exc:
            raise ChainIOError(f"cannot read segment {path}: {exc.strerror or exc}") from exc
        except zstandard.ZstdError as exc:
            raise ChainIOError(f"cannot read segment {path}: {exc}") from exc

    def write_data(self, number: int, source_fd: int, size: int) -> tuple[Path, str, Frames]:
        """Compress ``size`` bytes of ``source_fd`` for segment ``number``, durably.

        Written to a temporary name of this process (fsync'd); ``place_data``
        renames it into place. Returns the file, its SHA-256 and its frames.

        Raises:
            ChainIOError: reading or writing failed (no file is left behind).
        """
        import zstandard

        self.directory.mkdir(mode=0o755, exist_ok=True)
        temporary = self.directory / f".{number:06d}.jsonl.zst.{os.getpid()}.tmp"
        digest = hashlib.sha256()
        frames: list[tuple[int, int]] = []
        compressor = zstandard.ZstdCompressor(level=3)
        try:
            with temporary.open("wb") as out:
                done = 0
                written = 0
                while done < size:
                    chunk = os.pread(source_fd, min(FRAME_BYTES, size - done), done)
                    if not chunk:
                        raise ChainIOError(f"{temporary}: the chain ended while being sealed")
                    frame = compressor.compress(chunk)
                    frames.append((done, written))
                    out.write(frame)
                    digest.update(frame)
                    done += len(chunk)
                    written += len(frame)
                out.flush()
                os.fsync(out.fileno())
            temporary.chmod(0o444)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise ChainIOError(f"cannot write segment {temporary}: {exc.strerror}") from exc
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
        return temporary, digest.hexdigest(), tuple(frames)

    def place_data(self, temporary: Path, number: int) -> None:
        """Rename a segment file ``write_data`` wrote into place, durably.

        Raises:
            ChainIOError: the rename failed.
        """
        try:
            temporary.replace(self.directory / f"{number:06d}.jsonl.zst")
            fsync_dir(self.directory)
        except OSError as exc:
            raise ChainIOError(f"cannot place segment {number:06d}: {exc.strerror}") from exc

    def write_manifest(self, segment: Segment) -> Path:
        """Store a segment's manifest durably: from here on the segment is sealed.

        Raises:
            ChainIOError: the file cannot be written.
        """
        path = self.manifest_path(segment.number)
        atomic_write(path, canonical_bytes(segment.to_document()) + b"\n", 0o444)
        return path

    def remove_leftovers(self, keep: Path | None = None) -> None:
        """Remove temporary files and data no manifest names (a seal cut short), but ``keep``.

        Call it holding the chain lock: a writer compressing meanwhile then
        finds its file gone and gives up its seal (the next writer seals).
        """
        try:
            names = os.listdir(self.directory)  # noqa: PTH208
        except OSError:
            return
        sealed = {name[:6] for name in names if _MANIFEST.fullmatch(name)}
        for name in names:
            orphan = name.endswith(".jsonl.zst") and name[:6] not in sealed
            mine = keep is not None and name == keep.name
            if ((name.startswith(".") and name.endswith(".tmp")) or orphan) and not mine:
                with contextlib.suppress(OSError):
                    (self.directory / name).unlink()


def _check_sequence(segments: tuple[Segment, ...], directory: Path) -> None:
    """Manifests must number and place their segments one after another."""
    start, line = 0, 1
    for index, segment in enumerate(segments, start=1):
        if segment.number != index or segment.start != start or segment.first_line != line:
            raise SegmentGapError(
                f"sealed segment {index:06d} in {directory} is missing or out of place", line
            )
        start, line = segment.end, segment.first_line + segment.lines


_LISTINGS: ByIdentity[tuple[Segment, ...]] = ByIdentity()
_NEWEST: ByIdentity[Segment] = ByIdentity()


def forget_listings() -> None:
    """Read every manifest afresh on the next listing.

    A manifest is never rewritten, so a listing is remembered by its folder's
    identity alone; verification forgets it, so that a manifest edited in
    place is read as it now is.
    """
    _LISTINGS.clear()
    _NEWEST.clear()
