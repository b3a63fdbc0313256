"""Verifying a chain, and checkpointing a verified one."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

from ledger.core.chain import ChainReport
from ledger.core.checkpoint import (
    Checkpoint,
    checkpoint_signature_problem,
    compare_with_checkpoint,
    make_checkpoint,
)
from ledger.core.timefmt import format_ts
from ledger.core.trust import TrustStore
from ledger.errors import ChainBrokenError, ChainIOError, LedgerError
from ledger.services.chain.writer import WriterDeps
from ledger.services.ports import ChainStore


@dataclass(frozen=True, slots=True)
class VerifyOutcome:
    """What ``verify-chain`` reports."""

    ok: bool
    entries: int
    line: int | None
    reason: str | None
    head_hash: str | None = None
    genesis_hash: str | None = None


def verify_store(
    store: ChainStore,
    trust: TrustStore,
    checkpoint: Checkpoint | None = None,
    *,
    strict: bool = False,
    allow_markers: bool = False,
    progress: Callable[[int, int], None] | None = None,
    end: int | None = None,
) -> VerifyOutcome:
    """Verify every entry (up to position ``end``), then hold the chain against ``checkpoint``.

    Raises:
        ChainIOError: the chain cannot be read.
    """
    if store.exists():
        report = store.verify(
            trust, strict=strict, allow_markers=allow_markers, progress=progress, end=end
        )
    else:  # no entries yet: the checkpoint, if any, says whether some were lost
        report = ChainReport(ok=True, entries=0, lines=0)
    if not report.ok:
        return VerifyOutcome(False, report.entries, report.line, report.reason)
    if checkpoint is not None:
        problem = _checkpoint_problem(store, report, checkpoint, trust, allow_markers)
        if problem is not None:
            line, reason = problem
            return VerifyOutcome(False, report.entries, line, reason)
    return VerifyOutcome(True, report.entries, None, None, report.head_hash, report.genesis_hash)


def head_bound(store: ChainStore) -> int | None:
    """Where the chain ends now: a verification without the lock reads up to here.

    Only the head is read under the lock (a moment), so a line a writer is still
    appending is never taken for a torn tail; the chain is append-only, so the
    prefix up to here stays as it is while it is verified. ``None`` when the head
    cannot be read (a torn or corrupt tail): the verification reads the whole
    chain and reports it.

    Raises:
        LockTimeoutError: a writer held the lock longer than its timeout.
    """
    try:
        with store.transaction() as tx:
            head = tx.head()
    except ChainIOError:
        return None
    return head.size if head is not None else 0


def held_against_state(outcome: VerifyOutcome, state_size: int | None) -> VerifyOutcome:
    """An empty chain whose derived state folded entries lost them: BROKEN at line 1.

    A home with no entries yet verifies as ``OK 0 entries``; the derived state
    (like a checkpoint) is the evidence that entries existed.
    """
    if outcome.ok and outcome.entries == 0 and state_size:
        return VerifyOutcome(
            False, 0, 1, f"entry missing: the derived state has folded {state_size} entries"
        )
    return outcome


def _checkpoint_problem(
    store: ChainStore,
    report: ChainReport,
    checkpoint: Checkpoint,
    trust: TrustStore,
    allow_markers: bool,
) -> tuple[int | None, str] | None:
    signature_problem = checkpoint_signature_problem(checkpoint, trust)
    if signature_problem is not None:
        return None, signature_problem
    if report.entries == checkpoint.entries:
        hash_at_count = report.head_hash
    elif report.entries > checkpoint.entries:
        hash_at_count = store.hash_of_entry(checkpoint.entries, allow_markers=allow_markers)
    else:
        hash_at_count = None
    return compare_with_checkpoint(report, checkpoint, hash_at_count)


def _tree_root(deps: "CheckpointDeps", entries: int) -> str | None:
    """The RFC 9162 root over the verified chain (SPEC §10), from a checked index."""
    from ledger.services.chain.proofs import ProofDeps, checked_tree_root

    if not hasattr(deps, "merkle_index"):  # a store without a node index
        return None
    size, root_hash = checked_tree_root(cast("ProofDeps", deps))
    if size != entries:
        raise ChainBrokenError(size + 1, "the chain changed while it was checkpointed")
    return root_hash


class CheckpointDeps(WriterDeps, Protocol):
    """What writing a checkpoint needs."""

    def write_checkpoint(self, checkpoint: Checkpoint) -> Path:
        """Store a checkpoint; returns where."""
        ...

    def newest_checkpoint(self) -> Checkpoint | None:
        """The newest stored checkpoint."""
        ...


@dataclass(frozen=True, slots=True)
class CheckpointResult:
    """A written checkpoint."""

    path: str
    entries: int
    head_hash: str
    checkpoint: Checkpoint


def write_checkpoint(deps: CheckpointDeps) -> CheckpointResult:
    """Verify the home's chain and sign a checkpoint of its head.

    Raises:
        ChainBrokenError: the chain does not verify (nothing is signed).
        LedgerError: the chain is empty.
    """
    trust = deps.keys.load_trust()
    signer = deps.keys.active_signer(trust)
    with deps.chain.transaction():
        # Held against the newest checkpoint too: a new checkpoint must never
        # bless a chain that lost entries since the last one.
        outcome = verify_store(deps.chain, trust, deps.newest_checkpoint())
        if not outcome.ok:
            raise ChainBrokenError(outcome.line or 0, outcome.reason or "does not verify")
        if outcome.entries == 0 or outcome.head_hash is None or outcome.genesis_hash is None:
            raise LedgerError("the chain is empty: nothing to checkpoint")
        checkpoint = make_checkpoint(
            signer,
            outcome.genesis_hash,
            outcome.entries,
            outcome.head_hash,
            format_ts(deps.clock.now()),
            _tree_root(deps, outcome.entries),
        )
        path = deps.write_checkpoint(checkpoint)
    return CheckpointResult(str(path), checkpoint.entries, checkpoint.head_hash, checkpoint)
