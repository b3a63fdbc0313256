"""Moving sealed segments out of the home (``ledger archive``): copy, manifest, remove.

The order keeps every crash point safe: each segment's compressed file and
manifest are copied into the archive folder (temporary name, fsync, rename);
then the signed archive manifest is written there and into the home's
``segments/`` (from here on the segments are archived); only then are the
home's compressed files removed. The home keeps every segment's manifest and
the checkpoint sealing it. Running the command again finishes a cut-short run:
copies already there with the right hash are not made again.

``LEDGER_ARCHIVE_PAUSE_AT=POINT`` with ``LEDGER_ARCHIVE_PAUSE_FIFO=PATH`` is a
test's hold on a run at one of its crash points (``_pause_at``): there the run
writes the point's name into the FIFO and waits, so the test kills it with
``SIGKILL`` exactly there. Unset (always, outside those tests), it costs one
look-up of the environment per point.
"""

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from ledger.edges.fileio import atomic_write, copy_read_only, fsync_dir, sha256_of_file
from ledger.edges.files.segmentfiles import ARCHIVE_PREFIX, Segment, SegmentDir
from ledger.errors import ChainIOError


def _pause_at(point: str) -> None:
    """Stop here for good when a crash test asks for ``point`` (see the module's docstring)."""
    if os.environ.get("LEDGER_ARCHIVE_PAUSE_AT") != point:
        return
    with Path(os.environ["LEDGER_ARCHIVE_PAUSE_FIFO"]).open("w") as fifo:
        fifo.write(point)
    while True:  # until the test's SIGKILL
        time.sleep(60)


def archive_path(segments: SegmentDir, stamp: str) -> Path:
    """Where the home keeps an archive manifest written at ``stamp``."""
    return segments.directory / f"{ARCHIVE_PREFIX}{stamp}.json"


def copy_out(segments: SegmentDir, chosen: tuple[Segment, ...], target: Path) -> None:
    """Copy each chosen segment's file and manifest into ``target``, durably.

    Raises:
        ChainIOError: a file cannot be read or written (nothing in the home changed).
    """
    try:
        target.mkdir(parents=True, exist_ok=True)
        for segment in chosen:
            data = segments.directory / segment.name
            copy = target / segment.name
            if not (copy.exists() and sha256_of_file(copy) == segment.compressed_sha256):
                copy_read_only(data, copy)
            _pause_at(f"data-copied:{segment.number}")
            copy_read_only(
                segments.manifest_path(segment.number), target / f"{segment.number:06d}.json"
            )
            _pause_at(f"manifest-copied:{segment.number}")
            if sha256_of_file(copy) != segment.compressed_sha256:
                raise ChainIOError(f"{copy} does not hash as segment {segment.number:06d} says")
        fsync_dir(target)
    except OSError as exc:
        raise ChainIOError(f"cannot archive to {target}: {exc.strerror or exc}") from exc


def write_manifests(segments: SegmentDir, target: Path, stamp: str, document: bytes) -> Path:
    """The signed archive manifest, in the archive and then in the home.

    Never over another run's manifest: a run cut short after its manifest
    reached the home, run again at the same time stamp (a frozen clock, or
    within one tick), would otherwise replace the only signed record of the
    segments the first run already removed. Call it holding the chain lock.

    Raises:
        ChainIOError: a file cannot be written.
    """
    stamp = _free_stamp(segments, target, stamp)
    atomic_write(target / f"{ARCHIVE_PREFIX}{stamp}.json", document, 0o444)
    _pause_at("archive-manifest-archived")
    home = archive_path(segments, stamp)
    atomic_write(home, document, 0o444)
    _pause_at("archive-manifest-home")
    return home


def _free_stamp(segments: SegmentDir, target: Path, stamp: str) -> str:
    """``stamp``, or ``stamp-N`` for the first ``N`` that names no manifest yet in either folder."""
    candidate, number = stamp, 0
    while any(
        (folder / f"{ARCHIVE_PREFIX}{candidate}.json").exists()
        for folder in (target, segments.directory)
    ):
        number += 1
        candidate = f"{stamp}-{number}"
    return candidate


def remove_from_home(segments: SegmentDir, chosen: tuple[Segment, ...]) -> None:
    """Remove the archived segments' compressed files from the home.

    Raises:
        ChainIOError: a file cannot be removed.
    """
    try:
        for segment in chosen:
            (segments.directory / segment.name).unlink(missing_ok=True)
            _pause_at(f"removed:{segment.number}")
        fsync_dir(segments.directory)
    except OSError as exc:
        raise ChainIOError(f"cannot remove archived segments: {exc.strerror}") from exc


def archive_before(
    segments: SegmentDir,
    target: Path,
    before: str,
    make_manifest: Callable[[tuple[Segment, ...]], tuple[str, bytes]],
    locked: Callable[[], AbstractContextManager[object]],
) -> tuple[tuple[Segment, ...], Path | None]:
    """Archive every sealed segment still in the home whose entries are all before ``before``.

    Args:
        segments: the home's segments.
        target: the archive folder.
        before: an RFC 3339 time; a segment goes when its newest entry is earlier.
        make_manifest: the signed manifest's stamp and bytes for the chosen segments.
        locked: holds the chain lock (no recover retires a segment meanwhile).

    Returns:
        The segments archived and the home's copy of the manifest (``None``: nothing to do).

    Raises:
        ChainIOError: a file cannot be read, copied, written or removed.
    """
    chosen = tuple(
        segment
        for segment in segments.listing()
        if segment.last_ts < before and (segments.directory / segment.name).exists()
    )
    if not chosen:
        return (), None
    copy_out(segments, chosen, target)
    stamp, document = make_manifest(chosen)
    with locked():
        held = {segment.number for segment in segments.listing()}
        if any(segment.number not in held for segment in chosen):
            raise ChainIOError("the segments changed while they were archived; run it again")
        home = write_manifests(segments, target, stamp, document)
        remove_from_home(segments, chosen)
    return chosen, home
