"""What ``ledger recover`` does to a chain that already verifies.

Nothing is lost and nothing restored, but two things a damaged chain left
behind still need the operator's word:

- a BROKEN finding (kept in the derived state, sealed as ``chain.finding``)
  whose damage is gone (someone put the edited line back): a ``ledger.recovered``
  entry with nothing lost clears it from the fold, and the derived state is
  rebuilt from this chain;
- a derived state saved at a head the chain no longer has (the chain was
  changed or cut behind the gate's back, which halts every verdict naming
  ``recover``): the state is rebuilt from this chain.
"""

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ledger.errors import LedgerError
from ledger.services.chain.findings import describe_finding, sealed_finding, stored_finding
from ledger.services.chain.recover_report import RECOVERED_EVENT, RecoverReport
from ledger.services.chain.writer import Writer
from ledger.services.ports import ChainTx

if TYPE_CHECKING:
    from ledger.services.chain.snapshot import SnapshotDeps, SnapshotStore

_MAX_REASON = 1000


def settle_verifying_chain(
    deps: "SnapshotDeps", tx: ChainTx, files: "SnapshotStore", report: RecoverReport
) -> RecoverReport:
    """The report of a recover that found the chain verifying, after clearing what it must."""
    finding = stored_finding(deps.states) or sealed_finding(deps.chain)
    if finding is not None:
        return _clear_finding(deps, tx, files, report, finding)
    if _state_at_another_head(deps, tx):
        cleared = tuple(files.relative(path) for path in files.clear_state())
        return replace(report, state_cleared=cleared)
    return report


def _state_at_another_head(deps: "SnapshotDeps", tx: ChainTx) -> bool:
    """Whether the stored derived state names a head this (verifying) chain does not have."""
    try:
        stored = deps.states.load()
    except LedgerError:
        return False  # an unreadable state halts on its own, naming rebuild-state
    if stored is None:
        return False
    head = tx.head()
    if head is None:
        return stored.size > 0
    if stored.size > head.size:
        return True
    if stored.size == head.size:
        return stored.head_hash != head.entry_hash
    if stored.head_hash is None:
        return False
    return deps.chain.hash_of_entry(stored.size) != stored.head_hash


def _clear_finding(
    deps: "SnapshotDeps",
    tx: ChainTx,
    files: "SnapshotStore",
    report: RecoverReport,
    finding: dict[str, Any],
) -> RecoverReport:
    """A ``ledger.recovered`` entry with nothing lost clears the finding; the state is rebuilt."""
    damage = describe_finding(finding).removesuffix("; run `ledger recover`")
    cleared_report = replace(report, damage=f"{damage}; the chain verifies again"[:_MAX_REASON])
    sealed = Writer(deps).append(tx, RECOVERED_EVENT, cleared_report.payload())
    cleared = tuple(files.relative(path) for path in files.clear_state())
    return replace(
        cleared_report,
        state_cleared=cleared,
        entry_hash=sealed.entry_hash,
        message=f"{report.message}; the BROKEN finding is cleared",
    )
