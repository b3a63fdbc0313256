"""The files snapshot and recovery touch: ``snapshots/``, ``evidence/``, ``state/``.

Every whole-file write goes temp file → fsync → rename → fsync of the folder
(``atomic_write``); evidence is created exclusively and never overwritten or
deleted. The format of the files is ``ledger.core.snapshot``'s; this module
only moves bytes.
"""

import contextlib
import hashlib
import io
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from ledger.core.snapshot import (
    CHAIN_SUFFIX,
    CHECKPOINT_SUFFIX,
    MANIFEST_SUFFIX,
    SNAPSHOT_PREFIX,
)
from ledger.edges.fileio import (
    atomic_write,
    exclusive_create,
    fsync_dir,
    read_regular,
    read_user_file,
)
from ledger.edges.files import snapshotsegments
from ledger.edges.files.chainrestore import sealed_run, segments_kept, whole_chain
from ledger.edges.files.segmentfiles import SegmentDir
from ledger.errors import ChainIOError, InputDataError

_CHAIN_MODE = 0o600
# A gzip stream may not expand beyond this: a chain is text, and a bomb must not
# exhaust memory before its hash is found wrong.
_MAX_CHAIN_BYTES = 8 << 30


def compress(data: bytes) -> bytes:
    """Gzip-compress ``data`` without a timestamp: the same chain, the same bytes."""
    import gzip  # only snapshots need it

    return gzip.compress(data, compresslevel=6, mtime=0)


def decompress(data: bytes, source: str) -> bytes:
    """Undo ``compress``.

    Raises:
        InputDataError: not a complete gzip stream, or one expanding past 8 GiB.
    """
    import gzip  # only snapshots need it
    import zlib

    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            raw = stream.read(_MAX_CHAIN_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputDataError(f"{source} is not a valid gzip file: {exc}") from exc
    if len(raw) > _MAX_CHAIN_BYTES:
        raise InputDataError(f"{source} expands beyond {_MAX_CHAIN_BYTES} bytes")
    return raw


class _HashingWriter(io.RawIOBase):
    """A write-only file that hashes what passes through it to ``target``."""

    def __init__(self, target: BinaryIO) -> None:
        super().__init__()
        self.target = target
        self.digest = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.digest.update(view)
        self.target.write(view)
        return len(view)


def _make_dir(path: Path) -> None:
    """``mkdir -p``; a file in the way is an I/O failure like any other.

    Raises:
        ChainIOError: the directory cannot be made.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ChainIOError(f"cannot create {path}: {exc.strerror}") from exc


class SnapshotFiles:
    """The files of one home that snapshots and recovery read and write."""

    def __init__(
        self,
        home: Path,
        chain_path: Path,
        snapshots_dir: Path,
        checkpoints_dir: Path,
        state_dir: Path,
        segments: SegmentDir | None = None,
    ) -> None:
        self.home = home
        self.chain_path = chain_path
        self.segments = segments
        self.snapshots_dir = snapshots_dir
        self.checkpoints_dir = checkpoints_dir
        self.state_dir = state_dir
        self.evidence_dir = home / "evidence"

    def relative(self, path: Path) -> str:
        """``path`` relative to the home when it lies inside, else as given."""
        try:
            return path.relative_to(self.home).as_posix()
        except ValueError:
            return str(path)

    def read(self, path: Path, what: str) -> bytes:
        """A whole file.

        Raises:
            InputDataError: missing or unreadable (exit 65).
        """
        return read_user_file(path, what)

    def decompress(self, data: bytes, source: str) -> bytes:
        """See ``decompress``."""
        return decompress(data, source)

    def compress(self, data: bytes) -> bytes:
        """See ``compress``."""
        return compress(data)

    def chain_name(self) -> str:
        """The chain file's name, for messages."""
        return self.chain_path.name

    def read_chain(self) -> bytes | None:
        """The chain's bytes as they are on disk, or ``None`` if the file is missing.

        Raises:
            ChainIOError: the file exists but cannot be read, or is not a regular
                file (a FIFO, a directory, a symbolic link: see ``ChainFile``).
        """
        sealed = sealed_run(self.segments)
        try:
            data = read_regular(self.chain_path, follow_symlinks=False)
        except FileNotFoundError:
            data = None
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.chain_path}: {exc.strerror}") from exc
        if not sealed or self.segments is None:
            return data
        return whole_chain(self.segments, sealed, data)

    def write_chain_copy(self, stem: str, lines: Iterable[bytes]) -> tuple[Path, str, str]:
        """Compress ``lines`` into the snapshot's chain file as they come, durably.

        Constant memory whatever the chain's length: nothing is held but the
        compressor's window. Written to a temporary file, fsync'd and renamed.

        Returns:
            The file, the SHA-256 of its compressed bytes and of the raw lines.

        Raises:
            ChainIOError: the file cannot be written (nothing is left behind).
        """
        import gzip  # only snapshots need it

        _make_dir(self.snapshots_dir)
        path = self.snapshots_dir / (stem + CHAIN_SUFFIX)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        raw = hashlib.sha256()
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _CHAIN_MODE)
            with os.fdopen(fd, "wb") as handle:
                hashed = _HashingWriter(handle)
                with gzip.GzipFile(
                    filename="", mode="wb", fileobj=hashed, compresslevel=6, mtime=0
                ) as stream:
                    for line in lines:
                        raw.update(line)
                        stream.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            temp.replace(path)
            fsync_dir(path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise ChainIOError(f"cannot write {path}: {exc.strerror}") from exc
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        return path, hashed.digest.hexdigest(), raw.hexdigest()

    def copy_sealed(self, up_to: int) -> tuple[tuple[tuple[str, str], ...], int, tuple[Path, ...]]:
        """Copy the sealed segments that end by ``up_to`` into the snapshot folder, once each.

        See ``ledger.edges.files.snapshotsegments.copy_sealed``.

        Raises:
            ChainIOError: a segment cannot be read or copied.
        """
        if self.segments is None:
            return (), 0, ()
        return snapshotsegments.copy_sealed(self.segments, self.snapshots_dir, up_to)

    def read_segment_copies(self, manifest: Path, names: Iterable[str]) -> tuple[bytes, ...]:
        """The compressed segment copies a snapshot's manifest names.

        Raises:
            InputDataError: a copy is missing or unreadable (exit 65).
        """
        return tuple(read_user_file(manifest.parent / name, "snapshot segment") for name in names)

    def decompress_segment(self, data: bytes, source: str) -> bytes:
        """See ``ledger.edges.files.snapshotsegments.decompress_segment``."""
        return snapshotsegments.decompress_segment(data, source)

    def remove_unnamed_copies(self, named: Iterable[str]) -> None:
        """Remove segment copies no snapshot names, never the only copy of a segment."""
        held = sealed_run(self.segments)
        snapshotsegments.remove_unnamed(
            self.snapshots_dir, named, {segment.compressed_sha256 for segment in held}
        )

    def write_snapshot(
        self, stem: str, chain_gz: bytes | None, checkpoint: bytes, manifest: bytes
    ) -> tuple[Path, Path, Path]:
        """Write a snapshot's three files, the manifest last.

        Returns:
            The files written, in order: the compressed chain, the checkpoint,
            the manifest.

        Raises:
            ChainIOError: a file cannot be written.
        """
        _make_dir(self.snapshots_dir)
        chain_path = self.snapshots_dir / (stem + CHAIN_SUFFIX)
        if chain_gz is not None:  # else already written by ``write_chain_copy``
            atomic_write(chain_path, chain_gz, _CHAIN_MODE)
        checkpoint_path = self.snapshots_dir / (stem + CHECKPOINT_SUFFIX)
        atomic_write(checkpoint_path, checkpoint)
        manifest_path = self.snapshots_dir / (stem + MANIFEST_SUFFIX)
        atomic_write(manifest_path, manifest)
        return chain_path, checkpoint_path, manifest_path

    def snapshot_manifests(self) -> list[Path]:
        """Every snapshot manifest in the home, by name (oldest first)."""
        if not self.snapshots_dir.is_dir():
            return []
        return sorted(self.snapshots_dir.glob(f"{SNAPSHOT_PREFIX}*{MANIFEST_SUFFIX}"))

    def remove_snapshot(self, manifest: Path, siblings: list[str]) -> None:
        """Delete a snapshot: its manifest first (so a half-removed one is no snapshot).

        Raises:
            ChainIOError: a file cannot be removed.
        """
        try:
            manifest.unlink(missing_ok=True)
            for name in siblings:
                (manifest.parent / name).unlink(missing_ok=True)
            fsync_dir(manifest.parent)
        except OSError as exc:
            raise ChainIOError(f"cannot remove snapshot {manifest}: {exc.strerror}") from exc

    def checkpoint_files(self) -> list[Path]:
        """Every checkpoint file of the home."""
        if not self.checkpoints_dir.is_dir():
            return []
        return sorted(self.checkpoints_dir.glob("checkpoint-*.json"))

    def evidence_path(self, name: str) -> Path:
        """The first free evidence path for ``name`` (``name``, ``name-2``, …)."""
        candidate = self.evidence_dir / name
        number = 1
        while candidate.exists() or candidate.is_symlink():
            number += 1
            candidate = self.evidence_dir / f"{name}-{number}"
        return candidate

    def damaged_evidence_path(self, stamp: str) -> Path:
        """Where ``keep_damaged`` would store the damaged chain now."""
        return self.evidence_path(f"{self.chain_path.name}.damaged-{stamp}")

    def keep_damaged(self, data: bytes, stamp: str) -> Path:
        """Store the damaged chain's bytes as ``evidence/events.jsonl.damaged-<stamp>``.

        Created exclusively (a taken name gets a ``-2``, ``-3``… suffix), mode
        0600 like the chain, and fsynced; evidence is never overwritten or deleted.

        Raises:
            ChainIOError: the file cannot be written.
        """
        _make_dir(self.evidence_dir)
        while True:
            path = self.damaged_evidence_path(stamp)
            with contextlib.suppress(FileExistsError):
                exclusive_create(path, data, _CHAIN_MODE)
                return path

    def retire(self, path: Path) -> Path:
        """Move a file into ``evidence/`` (renamed, never deleted); returns the new path.

        Raises:
            ChainIOError: the file cannot be moved.
        """
        _make_dir(self.evidence_dir)
        target = self.evidence_path(path.name)
        try:
            try:
                target.hardlink_to(path)  # never replaces an existing file
            except OSError:
                path.rename(target)  # a file system without hard links
            else:
                path.unlink()
            fsync_dir(self.evidence_dir)
            fsync_dir(path.parent)
        except OSError as exc:
            raise ChainIOError(f"cannot move {path} to {target}: {exc.strerror}") from exc
        return target

    def replace_chain(self, data: bytes) -> None:
        """Replace the chain with ``data`` atomically (the caller holds the chain lock).

        Raises:
            ChainIOError: the file cannot be written; the old chain is unchanged.
        """
        sealed = sealed_run(self.segments)
        kept = 0 if self.segments is None else segments_kept(self.segments, sealed, data)
        # Sealed segments the recovered chain does not begin with leave for
        # evidence/, newest first, so the ones kept stay a contiguous run.
        if self.segments is not None:
            for segment in reversed(self.segments.loose()):
                if segment.number > kept:
                    self.retire(self.segments.manifest_path(segment.number))
                    with contextlib.suppress(ChainIOError):
                        self.retire(self.segments.data_path(segment))
        base = sealed[kept - 1].end if kept else 0
        atomic_write(self.chain_path, data[base:], _CHAIN_MODE)

    def clear_state(self) -> list[Path]:
        """Delete everything in the derived-state folder; returns what was removed.

        Derived state is rebuilt from the verified chain on next use (SPEC §1).

        Raises:
            ChainIOError: an entry cannot be removed.
        """
        if not self.state_dir.is_dir():
            return []
        removed = []
        for entry in sorted(self.state_dir.iterdir()):
            try:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            except OSError as exc:
                raise ChainIOError(f"cannot remove derived state {entry}: {exc.strerror}") from exc
            removed.append(entry)
        if removed:
            fsync_dir(self.state_dir)
        return removed
