"""The derived counter state and what makes it untrustworthy (SPEC §4 row 1).

``Counter`` is the folded state with the chain head it reflects. It cannot be
trusted when loading found damage, when the newest checkpoint disowns it, or
when what it holds says so (a sealed finding, a negative amount, a timestamp
that steps back more than the clock tolerance).
"""

import datetime as dt
from typing import TYPE_CHECKING, Any

from ledger.core.state import unfoldable_problem
from ledger.services.chain.kept_finding import finding_problem
from ledger.services.chain.key_records import PackedRefs
from ledger.services.ports import CounterDeps, Head

if TYPE_CHECKING:
    from ledger.core.budgets import Budget
    from ledger.core.checkpoint import Checkpoint
    from ledger.core.config import Config
    from ledger.core.trust import TrustStore


class Counter:
    """The folded state and the head it reflects; ``problem`` when untrustworthy."""

    __slots__ = (
        "budgets", "data", "dirty", "head", "new_keys", "new_refs", "point_due", "problem",
        "rebuilt", "refolded", "zone",
    )  # fmt: skip

    def __init__(
        self,
        data: dict[str, Any],
        head: Head | None,
        problem: str | None = None,
        *,
        dirty: bool = False,
        new_keys: list[dict[str, Any]] | None = None,
        new_refs: "PackedRefs | None" = None,
        rebuilt: bool = False,
        zone: dt.tzinfo = dt.UTC,
        refolded: int | None = None,
    ) -> None:
        self.data = data
        self.head = head
        self.problem = problem
        self.dirty = dirty
        # Idempotency keys folded since the state was stored; the key index
        # receives them before the state is saved, so an index that lags the
        # state can only happen with a state that lags the chain (caught up).
        self.new_keys = new_keys if new_keys is not None else []
        # Entry refs folded since, saved with the keys.
        self.new_refs = new_refs if new_refs is not None else PackedRefs()
        self.rebuilt = rebuilt
        # The budget day's zone the state is folded in (``usd.day_timezone``).
        self.zone = zone
        # The ``[[budgets]]`` definitions the budgets' counters are kept for.
        self.budgets: tuple[Budget, ...] = ()
        # Entries folded to count changed budget definitions afresh (``budget_refold``).
        self.refolded = refolded
        # An entry folded since the last state point (``state.POINT_EVERY``): keep one on save.
        self.point_due = False


def held_against_checkpoint(counter: Counter, deps: CounterDeps) -> Counter:
    """The counter, or the same marked untrustworthy if the newest checkpoint disowns it.

    SPEC §4: a stored state is trusted only while the chain is at least as long
    as the newest checkpoint and agrees with it. A state restored beside a cut
    chain matches that chain's head, so the head alone proves nothing. The
    checkpoint last found in agreement is remembered in the state; a new one
    is checked once (a scan for its entry when it is not the head).

    Raises:
        InputDataError: the newest checkpoint is unreadable.
        ChainIOError: the chain cannot be read.
    """
    checkpoint = deps.newest_checkpoint()
    if checkpoint is None:
        return counter
    meta = counter.data["meta"]
    if meta.get("checkpoint") == [checkpoint.entries, checkpoint.head_hash]:
        return counter
    from ledger.core.checkpoint import checkpoint_signature_problem

    problem = checkpoint_signature_problem(checkpoint, deps.keys.load_trust())
    entries = int(meta["entries"])
    if problem is None and entries < checkpoint.entries:
        problem = (
            f"chain has {entries} entries but its newest checkpoint vouches for "
            f"{checkpoint.entries} (truncated or deleted)"
        )
    if problem is None:
        head = counter.head
        if entries == checkpoint.entries and head is not None:
            found: str | None = head.entry_hash
        else:
            found = deps.chain.hash_of_entry(checkpoint.entries)
        if found != checkpoint.head_hash:
            problem = f"entry {checkpoint.entries} differs from the newest checkpoint's head"
    if problem is not None:
        return Counter(counter.data, counter.head, problem + "; run `ledger recover`")
    meta["checkpoint"] = [checkpoint.entries, checkpoint.head_hash]
    counter.dirty = True
    return counter


def counter_problem(counter: Counter, config: "Config") -> str | None:
    """Why the counter cannot be trusted (SPEC §4 row 1), or ``None``.

    Beyond damage found while loading: a negative amount, or a timestamp more
    than ``clock_tolerance_seconds`` earlier than the entry before it.
    """
    if counter.problem is not None:
        return counter.problem
    finding = finding_problem(counter.data)
    if finding is not None:
        return finding
    unfoldable = unfoldable_problem(counter.data)
    if unfoldable is not None:
        return unfoldable
    meta = counter.data["meta"]
    if meta.get("negative"):
        return f"{meta['negative']}; run `ledger rebuild-state` after checking the chain"
    if meta.get("max_backstep_us", 0) > config.clock_tolerance_seconds * 1_000_000:
        return (
            f"a recorded timestamp is {meta['max_backstep_us'] // 1_000_000} s earlier than "
            "the entry before it"
        )
    return None


def checkpoint_problem(
    data: dict[str, Any],
    head: Head | None,
    checkpoint: "Checkpoint",
    hashes: dict[int, str],
    trust: "TrustStore",
) -> str | None:
    """Why a folded chain does not hold what its newest checkpoint vouches for, or ``None``.

    ``data`` is the fold's state, ``hashes`` the entry hashes it remembered by
    position; the checkpoint's signature is checked against ``trust`` first.
    """
    from ledger.core.checkpoint import checkpoint_signature_problem

    signature = checkpoint_signature_problem(checkpoint, trust)
    if signature is not None:
        return signature
    entries = int(data["meta"]["entries"]) if head is not None else 0
    if entries < checkpoint.entries:
        return (
            f"chain has {entries} entries but its newest checkpoint vouches for "
            f"{checkpoint.entries} (truncated or deleted)"
        )
    if hashes.get(checkpoint.entries) != checkpoint.head_hash:
        return f"entry {checkpoint.entries} differs from the newest checkpoint's head"
    return None


def mismatch() -> str:
    """Why a state saved at a head the chain no longer has is not trusted."""
    # The chain was changed or cut behind the gate's back. recover keeps it as
    # evidence and restores what verifies (on a chain that verifies, it
    # rebuilds the state).
    return (
        "derived state does not match the chain head (the chain was changed); run `ledger recover`"
    )
