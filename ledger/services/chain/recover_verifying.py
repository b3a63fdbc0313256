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

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ledger.core.checkpoint import Checkpoint
from ledger.core.trust import TrustStore
from ledger.core.verified_mark import VerifiedMark
from ledger.errors import LedgerError
from ledger.services.chain.findings import describe_finding, sealed_finding, stored_finding
from ledger.services.chain.recover_report import RECOVERED_EVENT, RecoverReport
from ledger.services.chain.streaming import prefix_unchanged
from ledger.services.chain.verify import VerifyOutcome, head_bound, resume_point, verify_streamed
from ledger.services.chain.writer import Writer
from ledger.services.ports import ChainTx

if TYPE_CHECKING:
    from ledger.services.chain.snapshot import SnapshotDeps, SnapshotStore

_MAX_REASON = 1000


@dataclass(frozen=True, slots=True)
class ReadUnlocked:
    """What ``recover`` learnt without the lock about a chain that verified to its head."""

    mark: VerifiedMark
    outcome: VerifyOutcome
    # The chain up to ``scanned`` was read for a sealed finding (0: not read),
    # and ``finding`` is what that part gave.
    scanned: int
    finding: dict[str, Any] | None


def verify_unlocked(
    deps: "SnapshotDeps", trust: TrustStore, checkpoint: Checkpoint | None, *, scan: bool
) -> ReadUnlocked | None:
    """The chain verified as ``verify-chain`` checks it, without the lock, in constant memory.

    The chain is append-only, so what verifies now still does under the lock,
    where only the entries appended since are read (``verify_locked``). On a
    year-old home this is the difference between holding the lock for the
    whole chain and holding it for a few lines. ``None`` when the chain does
    not verify (the caller then looks at it the old way, under the lock).
    ``scan``: also read it for a sealed finding, when no stored one makes that moot.

    Raises:
        ChainIOError: the chain cannot be read.
    """
    if not deps.chain.exists():
        return None
    end = head_bound(deps.chain)
    if end is None:
        return None
    resume = resume_point(deps.chain, trust, checkpoint, deps.verified_mark())
    outcome = verify_streamed(deps.chain, trust, checkpoint, resume, end=end)
    if not outcome.ok or outcome.mark is None:
        return None
    if not scan or stored_finding(deps.states) is not None:
        return ReadUnlocked(outcome.mark, outcome, 0, None)
    return ReadUnlocked(outcome.mark, outcome, end, sealed_finding(deps.chain, 0, end))


def verify_locked(
    deps: "SnapshotDeps", trust: TrustStore, checkpoint: Checkpoint | None, read: ReadUnlocked
) -> VerifyOutcome | None:
    """Under the lock: the chain still verifies, reading the prefix's bytes and the new entries.

    ``None`` when the prefix read without the lock changed since (its bytes are
    hashed again, not parsed) or the entries after it do not verify.

    Raises:
        ChainIOError: the chain cannot be read.
    """
    resume = prefix_unchanged(deps.chain, read.mark)
    if resume is None:
        return None
    outcome = verify_streamed(deps.chain, trust, checkpoint, resume)
    return outcome if outcome.ok else None


def settle_verifying_chain(
    deps: "SnapshotDeps",
    tx: ChainTx,
    files: "SnapshotStore",
    report: RecoverReport,
    read: ReadUnlocked | None = None,
) -> RecoverReport:
    """The report of a recover that found the chain verifying, after clearing what it must.

    ``read``: what was read without the lock; only the lines after the part
    it scanned are read for a sealed finding.
    """
    scanned, found = (0, None) if read is None else (read.scanned, read.finding)
    finding = stored_finding(deps.states) or sealed_finding(deps.chain, scanned, None, found)
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
