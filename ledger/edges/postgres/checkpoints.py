"""Checkpoints kept in a fleet's database, beside each host's own (SPEC §8).

A checkpoint in one host's home protects only that host: another host would
verify a chain whose checkpointed tail was deleted and find nothing wrong.
So every checkpoint a host writes is also a row of ``checkpoints``, and every
host holds the database chain against the one vouching for the most entries
(a replayed old row never lowers that bar). The rows are appended only (the
table's trigger refuses UPDATE and DELETE); ``ledger recover`` retires the
ones that vouch for entries it moved to evidence.

The newest row is read with the chain's head, in the same round trip
(``ledger.edges.postgres.store``), so the gate pays nothing more for it.
"""

from ledger.core.canonical import canonical_bytes
from ledger.core.checkpoint import Checkpoint, CheckpointError
from ledger.core.snapshot import checkpoint_from_bytes
from ledger.edges.postgres.db import PgDatabase

NEWEST_SQL = "SELECT entries, document FROM checkpoints ORDER BY entries DESC, id DESC LIMIT 1"

# The last document parsed, by its bytes: every verdict reads the same one.
_PARSED: list[tuple[bytes, Checkpoint]] = []


class StoredCheckpointError(CheckpointError):
    """The newest stored checkpoint's row does not say what its document says."""


class PgCheckpoints:
    """The ``checkpoints`` table of one schema."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def write(self, checkpoint: Checkpoint) -> None:
        """Add a checkpoint (in the open transaction, if any).

        Raises:
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        document = canonical_bytes(checkpoint.to_document()) + b"\n"
        memo = self.db.memo()
        if memo is not None:
            memo.pop("checkpoint", None)
        self.db.execute(
            "INSERT INTO checkpoints (entries, head_hash, document) VALUES (%s, %s, %s)",
            (checkpoint.entries, checkpoint.head_hash, document),
        )

    def newest(self) -> Checkpoint | None:
        """The stored checkpoint vouching for the most entries, or ``None``.

        Raises:
            CheckpointError, SnapshotFileError: the row is not a checkpoint, or
                not the one it claims to be.
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        found = self.newest_document()
        return None if found is None else found[1]

    def newest_document(self) -> tuple[bytes, Checkpoint] | None:
        """The newest stored checkpoint's bytes and what they say (see ``newest``)."""
        kept = self.db.group_cache()
        if kept is None:
            kept = self.db.memo()
        if kept is not None and "checkpoint" in kept:
            found: tuple[int, bytes] | None = kept["checkpoint"]
        else:
            rows = self.db.execute(NEWEST_SQL)
            found = (int(rows[0][0]), bytes(rows[0][1])) if rows else None
        if found is None:
            return None
        entries, raw = found
        if _PARSED and _PARSED[0][0] == raw:
            checkpoint = _PARSED[0][1]
        else:
            checkpoint = checkpoint_from_bytes(raw, f"the newest checkpoint in {self.db.display}")
            _PARSED[:] = [(raw, checkpoint)]
        if checkpoint.entries != entries:
            # A row claiming more entries than its document would put an old
            # checkpoint in front of the newer ones: fail closed instead.
            raise StoredCheckpointError(
                f"the newest checkpoint in {self.db.display} claims {entries} entries "
                f"but vouches for {checkpoint.entries} (edited?)"
            )
        return raw, checkpoint
