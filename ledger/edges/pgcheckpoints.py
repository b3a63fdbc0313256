"""Checkpoints kept in a fleet's database, beside each host's own (SPEC §8).

A checkpoint in one host's home protects only that host: another host would
verify a chain whose checkpointed tail was deleted and find nothing wrong.
So every checkpoint a host writes is also a row of ``checkpoints``, and every
host holds the database chain against the one vouching for the most entries
(a replayed old row never lowers that bar). The rows are appended only (the
table's trigger refuses UPDATE and DELETE); ``ledger recover`` retires the
ones that vouch for entries it moved to evidence.

The newest row is read with the chain's head, in the same round trip
(``ledger.edges.pgstore``), so the gate pays nothing more for it.
"""

from ledger.core.canonical import canonical_bytes
from ledger.core.checkpoint import Checkpoint
from ledger.core.snapshot import checkpoint_from_bytes
from ledger.edges.pgdb import PgDatabase

NEWEST_SQL = "SELECT document FROM checkpoints ORDER BY entries DESC, id DESC LIMIT 1"

# The last document parsed, by its bytes: every verdict reads the same one.
_PARSED: list[tuple[bytes, Checkpoint]] = []


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
            CheckpointError, SnapshotFileError: the row is not a checkpoint.
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        memo = self.db.memo()
        if memo is not None and "checkpoint" in memo:
            raw: bytes | None = memo["checkpoint"]
        else:
            rows = self.db.execute(NEWEST_SQL)
            raw = bytes(rows[0][0]) if rows else None
        if raw is None:
            return None
        if _PARSED and _PARSED[0][0] == raw:
            return _PARSED[0][1]
        checkpoint = checkpoint_from_bytes(raw, f"the newest checkpoint in {self.db.display}")
        _PARSED[:] = [(raw, checkpoint)]
        return checkpoint
