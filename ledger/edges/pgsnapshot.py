"""Snapshots and recovery of a fleet's chain (SPEC §8).

Snapshots, checkpoints and evidence files stay in the home of the host that
takes them, as on one host; only the chain and the derived state live in the
database. ``ledger snapshot`` reads the exported chain, ``ledger recover``
keeps a copy of the damaged export in ``evidence/`` and moves every row that
is not part of the longest valid prefix to the ``evidence`` table.
"""

from pathlib import Path

from ledger.edges.pgstate import PgStateStore
from ledger.edges.pgstore import PgChainStore
from ledger.edges.snapshotfiles import SnapshotFiles


class PgSnapshotFiles(SnapshotFiles):
    """The home's snapshot files around a chain kept in the database."""

    def __init__(
        self,
        store: PgChainStore,
        states: PgStateStore,
        home: Path,
        snapshots_dir: Path,
        checkpoints_dir: Path,
        state_dir: Path,
    ) -> None:
        super().__init__(home, home / "events.jsonl", snapshots_dir, checkpoints_dir, state_dir)
        self.store = store
        self.states = states

    def chain_name(self) -> str:
        """The chain, for messages."""
        return f"the chain in {self.store.db.display}"

    def read_chain(self) -> bytes | None:
        """Every row's bytes in order, or ``None`` when the table is empty."""
        return self.store.read_all()

    def replace_chain(self, data: bytes) -> None:
        """Keep exactly the lines of ``data``; other rows go to the ``evidence`` table.

        Raises:
            ChainIOError: the role may not update or delete rows (only the recover
                role may), or the database failed; nothing changes then.
        """
        self.store.replace_all(data, "ledger recover: not part of the longest valid prefix")

    def clear_state(self) -> list[Path]:
        """Delete the derived state row and the key index, and the home's derived files."""
        self.states.delete()
        cleared = [Path(f"{self.store.db.schema}.derived_state")]
        return cleared + super().clear_state()
