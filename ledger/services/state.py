"""Loading the derived counter state under the chain lock, and keeping it current.

On every use the stored state is checked against the chain head: equal means
trusted; behind means the missing tail is verified and folded in; anything
else means the counter cannot be trusted (SPEC §4 row 1). A missing state is
rebuilt from the verified chain.
"""

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ledger.core.envelope import GENESIS
from ledger.core.seal import SealedEntry
from ledger.core.state import apply_entry, apply_parsed, empty_state
from ledger.errors import ChainIOError, InputDataError, StateMismatchError
from ledger.services.ports import ChainStore, ChainTx, Head

if TYPE_CHECKING:
    from ledger.core.trust import TrustStore


class StoredStateLike(Protocol):
    """What a state store returns."""

    @property
    def head_hash(self) -> str | None:
        """The chain head the state reflects."""
        ...

    @property
    def size(self) -> int:
        """The chain size the state reflects."""
        ...

    @property
    def data(self) -> dict[str, Any]:
        """The folded state."""
        ...


class StateStore(Protocol):
    """Where derived state is kept."""

    def load(self) -> StoredStateLike | None:
        """The stored state, or ``None``."""
        ...

    def save_state(self, head_hash: str | None, size: int, data: dict[str, Any]) -> None:
        """Replace the stored state."""
        ...

    def delete(self) -> None:
        """Remove the stored state."""
        ...


class Counter:
    """The folded state and the head it reflects; ``problem`` when untrustworthy."""

    __slots__ = ("data", "dirty", "head", "problem")

    def __init__(
        self,
        data: dict[str, Any],
        head: Head | None,
        problem: str | None = None,
        *,
        dirty: bool = False,
    ) -> None:
        self.data = data
        self.head = head
        self.problem = problem
        self.dirty = dirty


def _fold_range(
    store: ChainStore,
    data: dict[str, Any],
    trust: "TrustStore",
    start: int,
    end: int,
    expected_prev: str,
    first_line: int = 1,
) -> str | None:
    from ledger.core.chain import ChainVerifier  # only a lagging or missing state needs it

    verifier = ChainVerifier(
        trust,
        expected_prev=expected_prev,
        first_line=first_line,
        on_entry=lambda parsed: apply_parsed(data, parsed),
    )
    for raw in store.iter_lines(start, end):
        if not verifier.feed(raw):
            break
    report = verifier.report()
    if report.ok:
        return None
    where = "" if start == 0 else " after the derived state's head"
    return f"chain does not verify{where}: line {report.line}: {report.reason}"


def load_counter(
    tx: ChainTx, store: ChainStore, states: StateStore, trust: Callable[[], "TrustStore"]
) -> Counter:
    """The counter state matching the chain head, or one marked untrustworthy.

    Never raises for a damaged chain or state: the damage becomes ``problem``.
    """
    try:
        head = tx.head()
    except ChainIOError as exc:
        return Counter(empty_state(), None, str(exc))
    try:
        stored = states.load()
    except StateMismatchError as exc:
        return Counter(empty_state(), head, f"{exc}; run `ledger rebuild-state`")
    try:
        if stored is None:
            data = empty_state()
            if head is not None:
                problem = _fold_range(store, data, trust(), 0, head.size, GENESIS)
                if problem:
                    return Counter(data, head, problem + "; run `ledger recover`")
            return Counter(data, head, None, dirty=True)
        if head is None:
            if stored.head_hash is None:
                return Counter(stored.data, None)
            return Counter(empty_state(), None, _mismatch())
        if stored.size == head.size and stored.head_hash == head.entry_hash:
            return Counter(stored.data, head)
        if stored.size < head.size and stored.head_hash is not None:
            data = copy.deepcopy(stored.data)
            # Line numbers count from the top of the chain, as verify-chain's do
            # (our own writer never writes markers, so entries equal lines).
            first_line = int(stored.data["meta"]["entries"]) + 1
            problem = _fold_range(
                store, data, trust(), stored.size, head.size, stored.head_hash, first_line
            )
            if problem:
                return Counter(data, head, problem)
            return Counter(data, head, None, dirty=True)
    except (InputDataError, ChainIOError) as exc:
        return Counter(empty_state(), head, f"cannot verify the chain: {exc}")
    return Counter(empty_state(), head, _mismatch())


def _mismatch() -> str:
    return "derived state does not match the chain head; run `ledger rebuild-state`"


def fold_sealed(counter: Counter, sealed: SealedEntry, head: Head | None) -> None:
    """Fold an entry this process just appended (already trusted: we sealed it)."""
    entry = sealed.entry
    apply_entry(
        counter.data, entry["event_type"], sealed.ts_utc, entry["payload"], sealed.entry_hash
    )
    counter.head = head
    counter.dirty = True


def save_counter(counter: Counter, states: StateStore) -> None:
    """Store the counter if it changed and is trustworthy."""
    if counter.problem is None and counter.dirty:
        head = counter.head
        states.save_state(head.entry_hash if head else None, head.size if head else 0, counter.data)
        counter.dirty = False
