"""What ``ledger recover`` reports, and the entry type that records it.

Its own module so that the recovery of a damaged chain (``recover``) and the
settling of a verifying one (``recover_verifying``) both use it without
importing each other.
"""

from dataclasses import dataclass
from typing import Any

RECOVERED_EVENT = "ledger.recovered"


@dataclass(frozen=True, slots=True)
class RecoverReport:
    """What ``ledger recover`` found, did (or would do), and lost.

    ``action`` is ``"none"`` when the chain verifies or there is nothing to
    restore, else ``"recover"`` (also under ``--dry-run``, where ``dry_run`` says
    that nothing was changed). Line numbers count lines of the damaged file
    from 1; paths are relative to the home.
    """

    action: str
    dry_run: bool
    message: str
    damage: str | None
    damaged_lines: int
    restored_entries: int
    snapshot_entries: int
    lost_lines: int
    first_lost_line: int | None
    reason: str | None
    snapshot: str | None
    evidence: str | None
    head_hash: str | None
    checkpoint_entries: int | None
    checkpoints_retired: tuple[str, ...] = ()
    snapshots_rejected: tuple[tuple[str, str], ...] = ()
    state_cleared: tuple[str, ...] = ()
    entry_hash: str | None = None
    # The records after the damage carried onto the recovered chain (``core.reseal``),
    # and the hashes they were sealed again under (empty before they are).
    resealed: tuple[dict[str, Any], ...] = ()
    resealed_hashes: tuple[str, ...] = ()

    def payload(self) -> dict[str, Any]:
        """The ``ledger.recovered`` payload: what was lost, from which line, from which snapshot."""
        return {
            "damage": self.damage or "",
            "damaged_lines": self.damaged_lines,
            "restored_entries": self.restored_entries,
            "snapshot_entries": self.snapshot_entries,
            "lost_lines": self.lost_lines,
            "first_lost_line": self.first_lost_line,
            "reason": self.reason,
            "snapshot": self.snapshot,
            "evidence": self.evidence,
            "head_hash": self.head_hash,
            "checkpoint_entries": self.checkpoint_entries,
            "checkpoints_retired": list(self.checkpoints_retired),
            "resealed": [dict(item) for item in self.resealed],
            "resealed_hashes": list(self.resealed_hashes),
        }

    def to_json(self) -> dict[str, Any]:
        """The report printed on stdout."""
        return {
            "action": self.action,
            "dry_run": self.dry_run,
            "message": self.message,
            **self.payload(),
            "damage": self.damage,
            "snapshots_rejected": [
                {"snapshot": path, "reason": reason} for path, reason in self.snapshots_rejected
            ],
            "state_cleared": list(self.state_cleared),
            "entry_hash": self.entry_hash,
        }
