"""Verifying a chain, and checkpointing a verified one."""

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from ledger.core.chain import ChainReport
from ledger.core.checkpoint import (
    Checkpoint,
    checkpoint_signature_problem,
    compare_with_checkpoint,
    make_checkpoint,
)
from ledger.core.seal import seal_time
from ledger.core.timefmt import format_ts
from ledger.core.trust import TrustStore, trust_fingerprint
from ledger.core.verified_mark import VerifiedMark, mark_fits
from ledger.errors import ChainBrokenError, ChainIOError, LedgerError
from ledger.services.chain.streaming import (
    Resume,
    mark_holds,
    prefix_unchanged,
    stream_verify,
)
from ledger.services.chain.writer import WriterDeps
from ledger.services.ports import ChainStore

if TYPE_CHECKING:
    from ledger.services.chain.proofs import ProofDeps


@dataclass(frozen=True, slots=True)
class VerifyOutcome:
    """What ``verify-chain`` reports."""

    ok: bool
    entries: int
    line: int | None
    reason: str | None
    head_hash: str | None = None
    genesis_hash: str | None = None
    resumed_at: int | None = None
    mark: VerifiedMark | None = None
    root_hash: str | None = None


def resume_point(
    store: ChainStore, trust: TrustStore, checkpoint: Checkpoint | None, mark: VerifiedMark | None
) -> Resume | None:
    """Where a verification may start instead of at line 1, or ``None``.

    It may start at ``mark`` when the checkpoint is signed by a key that
    counts, the mark ends exactly where the checkpoint vouches for (count,
    head, tree root) under the same trust store, its sealed segments keep the
    stamps they had and the bytes after them hash as they did when they
    verified (``ledger.core.verified_mark``).
    """
    if mark is None or checkpoint is None:
        return None
    if checkpoint_signature_problem(checkpoint, trust) is not None:
        return None
    if not mark_fits(mark, checkpoint, trust_fingerprint(trust)):
        return None
    return prefix_unchanged(store, mark)


def verify_store(
    store: ChainStore,
    trust: TrustStore,
    checkpoint: Checkpoint | None = None,
    *,
    strict: bool = False,
    allow_markers: bool = False,
    progress: Callable[[int, int], None] | None = None,
    end: int | None = None,
    resume: Resume | None = None,
    workers: int | None = None,
) -> VerifyOutcome:
    """Verify every entry (up to position ``end``), then hold the chain against ``checkpoint``.

    With ``resume`` (a mark ``resume_point`` accepted) only the entries after
    it are read, in one pass in constant memory; the outcome then carries the
    tree root and a mark at the head. Without it the store verifies every
    entry (in parallel where it can: ``workers`` processes, else the core count).

    Raises:
        ChainIOError: the chain cannot be read.
    """
    if resume is not None and (end is None or end >= resume.mark.position):
        return verify_streamed(
            store, trust, checkpoint, resume, strict=strict, allow_markers=allow_markers, end=end
        )
    if store.exists():
        report = store.verify(
            trust, strict=strict, allow_markers=allow_markers, progress=progress, end=end,
            workers=workers,
        )  # fmt: skip
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


def verify_streamed(
    store: ChainStore,
    trust: TrustStore,
    checkpoint: Checkpoint | None,
    resume: Resume | None,
    *,
    strict: bool = False,
    allow_markers: bool = False,
    end: int | None = None,
) -> VerifyOutcome:
    """Verify in one pass in constant memory (after ``resume`` when given), with the tree root.

    Then hold the chain against ``checkpoint``; the outcome carries the root
    and a mark at the verified head.

    Raises:
        ChainIOError: the chain cannot be read.
    """
    if checkpoint is not None:
        problem = checkpoint_signature_problem(checkpoint, trust)
        if problem is not None:
            return VerifyOutcome(False, 0, None, problem)
    wanted = checkpoint.entries if checkpoint is not None else None
    passed = stream_verify(
        store, trust, resume=resume, end=end, strict=strict, allow_markers=allow_markers,
        hash_at_count=wanted,
    )  # fmt: skip
    report = passed.report
    if not report.ok:
        return VerifyOutcome(False, report.entries, report.line, report.reason)
    if checkpoint is not None:
        hash_at_count = passed.hash_at
        done = resume.mark.entries if resume is not None else 0
        if checkpoint.entries == done and resume is not None:
            hash_at_count = resume.mark.head_hash
        elif checkpoint.entries < done:
            hash_at_count = store.hash_of_entry(checkpoint.entries, allow_markers=allow_markers)
        departure = compare_with_checkpoint(report, checkpoint, hash_at_count)
        if departure is not None:
            line, reason = departure
            return VerifyOutcome(False, report.entries, line, reason)
    return VerifyOutcome(
        True, report.entries, None, None, report.head_hash, report.genesis_hash,
        None if resume is None else resume.mark.entries, passed.mark, passed.root_hash,
    )  # fmt: skip


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


def committed_bound(store: ChainStore) -> int | None:
    """Where the chain ends now, read without the lock when the store can (``head_bound``).

    A database's rows commit whole, so its committed end is never a torn
    line and reading it makes no writer wait; a file's head is read under
    its lock a moment.
    """
    committed = getattr(store, "committed_end", None)
    if committed is not None:
        try:
            return int(committed())
        except ChainIOError:
            return None
    return head_bound(store)


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


class CheckpointDeps(WriterDeps, Protocol):
    """What writing a checkpoint needs."""

    def write_checkpoint(self, checkpoint: Checkpoint) -> Path:
        """Store a checkpoint; returns where."""
        ...

    def newest_checkpoint(self) -> Checkpoint | None:
        """The newest stored checkpoint."""
        ...

    def verified_mark(self) -> VerifiedMark | None:
        """Where the verification of the newest checkpoint written here ended."""
        ...

    def keep_verified_mark(self, mark: VerifiedMark) -> None:
        """Keep where a checkpoint's verification ended."""
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

    The verification reads, without the chain lock, the entries up to the head
    read at the start — only those after the newest checkpoint's verified mark
    when it has one — in one pass in constant memory, building the tree root as
    it goes. The lock is then held a moment: the head must still be where it
    was read (a recover meanwhile replaces the chain), and the checkpoint and
    its mark are written.

    Raises:
        ChainBrokenError: the chain does not verify (nothing is signed).
        LedgerError: the chain is empty.
    """
    trust = deps.keys.load_trust()
    signer = deps.keys.active_signer(trust)
    newest = deps.newest_checkpoint()
    end = head_bound(deps.chain)
    resume = resume_point(deps.chain, trust, newest, deps.verified_mark())
    # Held against the newest checkpoint too: a new checkpoint must never
    # bless a chain that lost entries since the last one.
    outcome = verify_streamed(deps.chain, trust, newest, resume, end=end)
    if not outcome.ok:
        raise ChainBrokenError(outcome.line or 0, outcome.reason or "does not verify")
    mark = outcome.mark
    if outcome.entries == 0 or mark is None or outcome.root_hash is None:
        raise LedgerError("the chain is empty: nothing to checkpoint")
    checkpoint = make_checkpoint(
        signer,
        mark.chain_id,
        mark.entries,
        mark.head_hash,
        # Never dated before the head it vouches for (LEDGER_NOW replaying the
        # past): the signing key must be valid at that time.
        format_ts(seal_time(deps.clock.now(), mark.head_ts)),
        outcome.root_hash,
    )
    with deps.chain.transaction():
        if not mark_holds(deps.chain, mark):
            raise ChainBrokenError(
                mark.entries, "the chain changed while it was checkpointed; run it again"
            )
        path = deps.write_checkpoint(checkpoint)
    keep_mark(deps, mark)
    _catch_up_index(deps)
    return CheckpointResult(str(path), checkpoint.entries, checkpoint.head_hash, checkpoint)


def _catch_up_index(deps: "CheckpointDeps") -> None:
    """Add the new entries to the Merkle node index, so that ``prove`` finds it ready.

    O(entries since the index's mark); the index is derived state, so one that
    cannot be caught up now is caught up by the next command that needs it.
    """
    from ledger.services.chain.merkle_sync import catch_up

    if not hasattr(deps, "merkle_index"):  # a store without a node index
        return
    proof_deps = cast("ProofDeps", deps)
    with (
        contextlib.suppress(LedgerError),
        proof_deps.chain.read_transaction(),
        proof_deps.exclusive("merkle-index"),
        proof_deps.merkle_index() as index,
    ):
        catch_up(index, proof_deps.chain)


def keep_mark(deps: "CheckpointDeps", mark: VerifiedMark) -> None:
    """Keep where a checkpoint's verification ended; a mark that cannot be kept costs only time."""
    with contextlib.suppress(LedgerError, OSError):
        deps.keep_verified_mark(mark)
