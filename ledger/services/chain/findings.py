"""A chain known to be broken stays broken: what full verification found, remembered.

The gate folds the chain incrementally and never re-reads a line it has folded,
so an entry edited in place after it was folded goes unseen by verdicts. Full
verification (``verify-chain`` on the home's own chain, or the daemon's
scheduled run) sees it; its finding is kept in the derived state, which every
verdict already loads, so each verdict checks it in O(1) and halts
``counter_inconsistent`` naming the line.

The finding is also sealed in the chain: a ``chain.finding`` entry appended at
the tail names the line and the reason. The derived state folds it like any
entry, so putting back an older derived state (or deleting it) cannot hide the
finding: folding the chain up to its head finds it again. Only ``ledger
recover`` clears it: the restored prefix ends before the damage (so before the
sealed finding), and its ``ledger.recovered`` entry clears the finding from the
fold.

Kept in the derived state, the finding shares its protection: the file store's
state carries an HMAC, so an edited finding fails the state's integrity check
(the gate halts); a state rebuilt for a new trust store or time zone carries the
finding over. On PostgreSQL the state is a row in the store, so every host sees
the finding.
"""

from typing import TYPE_CHECKING, Any, Protocol

from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.state import CHAIN_FINDING, FINDING_KEY
from ledger.errors import LedgerError, StateMismatchError
from ledger.services.chain.kept_finding import describe_finding, finding_of, finding_problem
from ledger.services.chain.writer import Writer, WriterDeps
from ledger.services.ports import ChainStore, CounterDeps, StateStore

if TYPE_CHECKING:
    from ledger.core.verified_mark import VerifiedMark
    from ledger.services.chain.verify import VerifyOutcome

__all__ = [
    "FINDING_KEY",
    "FindingDeps",
    "describe_finding",
    "finding_of",
    "finding_problem",
    "remember_finding",
    "sealed_finding",
    "stored_finding",
]
_MAX_REASON = 1024


class FindingDeps(WriterDeps, CounterDeps, Protocol):
    """What keeping a finding needs: the counter, and a writer to seal it."""

    def verified_mark(self) -> "VerifiedMark | None":
        """Where the newest checkpoint's verification ended, if known."""
        ...


def stored_finding(states: StateStore) -> dict[str, Any] | None:
    """The finding in the stored derived state, or ``None`` (none, or no usable state)."""
    try:
        stored = states.load()
    except (StateMismatchError, LedgerError):
        return None
    return None if stored is None else finding_of(stored.data)


def sealed_finding(
    chain: ChainStore,
    start: int = 0,
    end: int | None = None,
    found: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The newest ``chain.finding`` sealed after the last ``ledger.recovered``, or ``None``.

    Reads the chain's lines as they are (``recover`` asks, about a chain that
    verifies); a line that does not parse is skipped: it is verification's business.
    ``start``/``end`` (line boundaries) read a part of the chain, carrying on from
    ``found``, what the part before ``start`` gave: ``recover`` reads the chain up
    to its head without the lock and only what was appended since under it.
    """
    if not chain.exists():
        return found
    for line in chain.iter_lines(start, end):
        if b'"chain.finding"' not in line and b'"ledger.recovered"' not in line:
            continue
        try:
            parsed = parse_line(line.rstrip(b"\n"))
        except EnvelopeFormatError:
            continue
        if parsed.event_type == CHAIN_FINDING and isinstance(parsed.payload, dict):
            found = parsed.payload
        elif parsed.event_type == "ledger.recovered":
            found = None
    return found


def verify_and_remember(deps: FindingDeps, *, full: bool = True) -> "VerifyOutcome | None":
    """Verify the chain as ``verify-chain`` does, keeping a BROKEN finding for the gate.

    ``full``: every entry (``verify-chain --full``); else only the entries after
    the newest checkpoint's verified mark, when it has one (``verify-chain``).
    Returns ``None`` when there is no chain yet.

    Raises:
        LockTimeoutError: the chain lock stayed busy while keeping a finding.
        ChainIOError: the chain or the state cannot be read or written.
        InputDataError: the trust store or the newest checkpoint is unreadable.
    """
    from ledger.services.chain.verify import head_bound, resume_point, verify_store

    if not deps.chain.exists():
        return None
    # Without the lock, up to the head read now: verdicts go on meanwhile.
    end = head_bound(deps.chain)
    trust = deps.keys.load_trust()
    checkpoint = deps.newest_checkpoint()
    resume = None
    if not full:
        resume = resume_point(deps.chain, trust, checkpoint, deps.verified_mark())
    outcome = verify_store(deps.chain, trust, checkpoint, end=end, resume=resume)
    if not outcome.ok:
        remember_finding(deps, outcome.line, outcome.reason or "does not verify")
    return outcome


def remember_finding(deps: FindingDeps, line: int | None, reason: str) -> bool:
    """Seal a BROKEN finding at the chain's tail and keep it in the derived state.

    Under the chain lock. The same finding already kept and sealed is not
    written again (a daemon verifying every few minutes writes it once); one kept
    but not yet sealed (the writer key was unusable) is sealed on the next try.
    Returns whether anything was written. A counter that is already untrustworthy
    (the damage is in its unfolded tail, the state is edited, the chain is
    torn) is not written: every verdict finds that damage again on its own.

    Raises:
        LockTimeoutError: the chain lock stayed busy.
        ChainIOError: the chain or the state cannot be read or written.
        KeyFileError: no usable writer key to seal it (the state keeps it).
    """
    from ledger.services.chain.state import load_counter

    with deps.chain.transaction() as tx:
        counter = load_counter(tx, deps)
        if counter.problem is not None:
            return False
        finding = {"line": line, "reason": reason[:_MAX_REASON] or "does not verify"}
        sealed = sealed_finding(deps.chain)
        is_sealed = sealed is not None and {k: sealed.get(k) for k in finding} == finding
        is_kept = counter.data["meta"].get(FINDING_KEY) == finding
        if is_sealed and is_kept:
            return False
        if not is_kept:
            # The state first: the gate reads it even if the seal below fails
            # (no usable writer key). Saved at the head it folded; the next load
            # folds the sealed entry and finds the same finding.
            counter.data["meta"][FINDING_KEY] = finding
            head = counter.head
            if counter.new_keys or counter.new_refs or counter.rebuilt:
                deps.states.save_keys(
                    counter.new_keys, replace=counter.rebuilt, refs=counter.new_refs
                )
            # Unlike a verdict's save, a failed write is an error here: a finding
            # that silently failed to persist would leave the gate admitting.
            deps.states.save_state(
                head.entry_hash if head else None, head.size if head else 0, counter.data
            )
        seal_failure: LedgerError | None = None
        if not is_sealed:
            try:
                Writer(deps).append(tx, CHAIN_FINDING, finding)
            except LedgerError as exc:  # the kept state still halts the gate
                seal_failure = exc
    if seal_failure is not None:
        raise seal_failure
    return True
