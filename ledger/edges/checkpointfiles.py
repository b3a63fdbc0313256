"""Checkpoint files: ``checkpoints/checkpoint-<time>-<entries>.json``."""

import json
import os
import re
from pathlib import Path

from ledger.core.canonical import canonical_bytes
from ledger.core.checkpoint import Checkpoint, CheckpointError, checkpoint_from_document
from ledger.edges.files import atomic_write, read_json_file
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
        try:
            names = os.listdir(self.directory)  # noqa: PTH208 - names only, no Path per file
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.directory}: {exc.strerror}") from exc
        paths = [self.directory / name for name in names if _PATTERN.fullmatch(name)]
        # Every verdict asks, and a home gathers a checkpoint a day: the newest
        # is found by its name and read alone. Names are only a guide: when the
        # file's own time and count do not match its name, all are read.
        named = _ranks_by_name(paths)
        if named:
            path = max(named, key=named.__getitem__)
            checkpoint = load_checkpoint(path)
            if named[path] == (_stamp(checkpoint.ts_utc), checkpoint.entries):
                return path, checkpoint
        newest: tuple[tuple[str, int], Path, Checkpoint] | None = None
        for path in paths:
            checkpoint = load_checkpoint(path)
            rank = (checkpoint.ts_utc, checkpoint.entries)
            if newest is None or rank > newest[0]:
                newest = (rank, path, checkpoint)
        return None if newest is None else (newest[1], newest[2])


_PATTERN = re.compile(r"checkpoint-.*\.json")
_STAMP = re.compile(r"checkpoint-(\d{8}T\d{12}Z)-(\d{12})\.json")


def _stamp(ts_utc: str) -> str:
    return ts_utc.replace("-", "").replace(":", "").replace(".", "")


def _ranks_by_name(paths: list[Path]) -> dict[Path, tuple[str, int]]:
    """Each file's (time, entry count) as its name gives them; empty if any name lacks them."""
    ranks = {}
    for path in paths:
        match = _STAMP.fullmatch(path.name)
        if match is None:
            return {}
        ranks[path] = (match.group(1), int(match.group(2)))
    return ranks


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


__all__ = ["CheckpointDir", "CheckpointError", "checkpoint_json", "load_checkpoint"]
