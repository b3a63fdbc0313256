"""Checkpoint files: ``checkpoints/checkpoint-<time>-<entries>.json``."""

import json
import os
import re
from pathlib import Path

from ledger.core.canonical import canonical_bytes
from ledger.core.checkpoint import Checkpoint, CheckpointError, checkpoint_from_document
from ledger.core.verified_mark import VerifiedMark, mark_from_document
from ledger.edges.fileio import (
    ByIdentity,
    atomic_write,
    file_identity,
    identity_of_stat,
    read_json_file,
)
from ledger.errors import ChainIOError


class CheckpointDir:
    """The checkpoints of one home."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def write(self, checkpoint: Checkpoint) -> Path:
        """Store a checkpoint durably; returns its path.

        Raises:
            ChainIOError: the file cannot be written.
        """
        stamp = _stamp(checkpoint.ts_utc)
        path = self.directory / f"checkpoint-{stamp}-{checkpoint.entries:012d}.json"
        atomic_write(path, canonical_bytes(checkpoint.to_document()) + b"\n")
        return path

    def newest(self) -> tuple[Path, Checkpoint] | None:
        """The newest checkpoint by its sealed time, then its entry count.

        Raises:
            CheckpointError: the newest file is malformed.
        """
        listing = self._listing()
        if listing is None:
            return None
        names, by_name = listing
        # Every verdict asks, and a home gathers a checkpoint a day: the newest
        # is found by its name and read alone. Names are only a guide: when the
        # file's own time and count do not match its name, all are read.
        if by_name is not None:
            name, rank = by_name
            path = self.directory / name
            checkpoint = _known_checkpoint(path)
            if rank == (_stamp(checkpoint.ts_utc), checkpoint.entries):
                return path, checkpoint
        newest: tuple[tuple[str, int], Path, Checkpoint] | None = None
        for name in names:
            path = self.directory / name
            checkpoint = _known_checkpoint(path)
            rank = (checkpoint.ts_utc, checkpoint.entries)
            if newest is None or rank > newest[0]:
                newest = (rank, path, checkpoint)
        return None if newest is None else (newest[1], newest[2])

    def _listing(self) -> "_Listing | None":
        """The checkpoint files' names and the newest by name; ``None``: no directory.

        The list is remembered by the directory's identity (adding, renaming
        or removing a file changes its mtime and ctime), unless the directory
        changed so recently that a change in the same clock tick could go
        unseen: a year of daily checkpoints is 365 names to sort through on
        every verdict.
        """
        try:
            identity = identity_of_stat(os.stat(self.directory))  # noqa: PTH116 - one syscall
            known = _LISTINGS.get(identity)
            if known is not None:
                return known
            names = os.listdir(self.directory)  # noqa: PTH208 - names only, no Path per file
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.directory}: {exc.strerror}") from exc
        found = [name for name in names if _PATTERN.fullmatch(name)]
        ranks = _ranks_by_name(found)
        newest = max(ranks.items(), key=lambda item: item[1]) if ranks else None
        listing = (found, newest)
        _LISTINGS.keep(listing, identity)
        return listing


_PATTERN = re.compile(r"checkpoint-.*\.json")
_STAMP = re.compile(r"checkpoint-(\d{8}T\d{12}Z)-(\d{12})\.json")


def _stamp(ts_utc: str) -> str:
    return ts_utc.replace("-", "").replace(":", "").replace(".", "")


def _ranks_by_name(names: list[str]) -> dict[str, tuple[str, int]]:
    """Each file's (time, entry count) as its name gives them; empty if any name lacks them."""
    ranks = {}
    for name in names:
        match = _STAMP.fullmatch(name)
        if match is None:
            return {}
        ranks[name] = (match.group(1), int(match.group(2)))
    return ranks


# Checkpoints this process has read, and the directories it has listed, by the
# identity of the file or directory: every verdict asks for the newest, which
# changes once a day.
_KNOWN: ByIdentity[Checkpoint] = ByIdentity()
# A directory's checkpoint names, and the newest of them by name (``None`` when
# some name does not give its time and count).
_Listing = tuple[list[str], tuple[str, tuple[str, int]] | None]
_LISTINGS: ByIdentity[_Listing] = ByIdentity()


def _known_checkpoint(path: Path) -> Checkpoint:
    identity = file_identity(path)
    known = _KNOWN.get(identity)
    if known is not None:
        return known
    checkpoint = load_checkpoint(path)
    if identity is not None:
        _KNOWN.keep(checkpoint, identity)
    return checkpoint


def load_checkpoint(path: Path) -> Checkpoint:
    """Read a checkpoint file.

    Raises:
        InputDataError: unreadable or not JSON.
        CheckpointError: not a checkpoint.
    """
    document = read_json_file(path, "checkpoint")
    return checkpoint_from_document(document, str(path))


def checkpoint_json(checkpoint: Checkpoint) -> str:
    """A checkpoint as JSON text (for snapshots)."""
    return json.dumps(checkpoint.to_document(), sort_keys=True)


def load_mark(path: Path) -> VerifiedMark | None:
    """The verified mark kept at ``path``, or ``None`` when absent or unusable (a cache)."""
    try:
        return mark_from_document(json.loads(path.read_bytes()))
    except (OSError, ValueError):
        return None


def save_mark(path: Path, mark: VerifiedMark) -> None:
    """Keep a verified mark (atomically; it is derived, so losing it costs only time).

    Raises:
        ChainIOError: the file cannot be written.
    """
    atomic_write(path, canonical_bytes(mark.to_document()) + b"\n")


__all__ = [
    "CheckpointDir",
    "CheckpointError",
    "checkpoint_json",
    "load_checkpoint",
    "load_mark",
    "save_mark",
]
