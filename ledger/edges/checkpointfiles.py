"""Checkpoint files: ``checkpoints/checkpoint-<time>-<entries>.json``."""

import json
from pathlib import Path

from ledger.core.canonical import canonical_bytes
from ledger.core.checkpoint import Checkpoint, CheckpointError, checkpoint_from_document
from ledger.edges.files import atomic_write, read_json_file


class CheckpointDir:
    """The checkpoints of one home."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def write(self, checkpoint: Checkpoint) -> Path:
        """Store a checkpoint durably; returns its path.

        Raises:
            ChainIOError: the file cannot be written.
        """
        stamp = checkpoint.ts_utc.replace("-", "").replace(":", "").replace(".", "")
        path = self.directory / f"checkpoint-{stamp}-{checkpoint.entries:012d}.json"
        atomic_write(path, canonical_bytes(checkpoint.to_document()) + b"\n")
        return path

    def newest(self) -> tuple[Path, Checkpoint] | None:
        """The newest checkpoint by its sealed time, then its entry count.

        Raises:
            CheckpointError: the newest file is malformed.
        """
        if not self.directory.is_dir():
            return None
        newest: tuple[tuple[str, int], Path, Checkpoint] | None = None
        for path in self.directory.glob("checkpoint-*.json"):
            checkpoint = load_checkpoint(path)
            rank = (checkpoint.ts_utc, checkpoint.entries)
            if newest is None or rank > newest[0]:
                newest = (rank, path, checkpoint)
        return None if newest is None else (newest[1], newest[2])


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
