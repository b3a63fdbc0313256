"""Snapshots and recovery of a fleet's chain (SPEC §8).

Snapshots, checkpoints and evidence files stay in the home of the host that
takes them, as on one host; the chain, the derived state and a copy of every
checkpoint live in the database. ``ledger snapshot`` reads the exported chain,
``ledger recover`` keeps a copy of the damaged export in ``evidence/`` and
moves every row that is not part of the longest valid prefix to the
``evidence`` table, with the stored checkpoints that vouch for those rows.

Recovery weighs the database's newest checkpoint with the home's own files: a
host that never wrote a checkpoint still sees a tail cut below the fleet's.
"""

from pathlib import Path

from ledger.edges.files.snapshotfiles import SnapshotFiles
from ledger.edges.postgres.checkpoints import NEWEST_SQL, PgCheckpoints
from ledger.edges.postgres.state import PgStateStore
from ledger.edges.postgres.store import PgChainStore


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

    @property
    def _stored_checkpoint(self) -> Path:
        # Stands for the database's newest checkpoint among the home's files.
        return Path(f"{self.store.db.schema}.checkpoints")

    def checkpoint_files(self) -> list[Path]:
        """The home's checkpoint files, and the database's newest checkpoint if any."""
        found = super().checkpoint_files()
        if self.store.db.execute(NEWEST_SQL):
            found.append(self._stored_checkpoint)
        return found

    def read(self, path: Path, what: str) -> bytes:
        """A whole file, or the database's newest checkpoint.

        Raises:
            InputDataError: missing or unreadable, or a stored checkpoint that
                is not the one its row claims (recovery then retires it).
        """
        if path == self._stored_checkpoint:
            found = PgCheckpoints(self.store.db).newest_document()
            return b"" if found is None else found[0]
        return super().read(path, what)

    def evidence_path(self, name: str) -> Path:
        """Where ``name`` goes as evidence (a stored checkpoint: the evidence table)."""
        if name == self._stored_checkpoint.name:
            return Path(f"{self.store.db.schema}.evidence")
        return super().evidence_path(name)

    def retire(self, path: Path) -> Path:
        """Move a file into ``evidence/``; a stored checkpoint is already there.

        ``replace_chain`` (``recover_chain()`` in the database) moved the stored
        checkpoints of entries no longer in the chain to the evidence table.
        """
        if path == self._stored_checkpoint:
            return self.evidence_path(path.name)
        return super().retire(path)

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
