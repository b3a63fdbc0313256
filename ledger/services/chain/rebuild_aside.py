"""Folding the derived state afresh beside the live one, so verdicts never wait on it (SPEC §21).

``rebuild-state`` folds the whole verified chain without the chain lock: the
chain is append-only and a verified prefix stays verified, so what it folds is
still true when the lock is taken. Under the lock only the entries appended
meanwhile are verified and folded (the ordinary catch-up of a state that lags),
and the new state takes the live one's place. Until then verdicts are decided
from the live state; a rebuild cut short leaves it as it was.
"""

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, cast

from ledger.errors import ChainIOError, LedgerError
from ledger.services.chain.counter import Counter
from ledger.services.chain.state import load_counter, save_counter
from ledger.services.ports import ChainTx, CounterDeps, Head, StateStore

if TYPE_CHECKING:
    from ledger.services.chain.key_records import PackedRefs


class AsideStore(StateStore, Protocol):
    """A derived-state store built beside the live one and swapped in."""

    def holding(self) -> AbstractContextManager[None]:
        """Held by the one rebuild building it."""
        ...

    def clear(self) -> None:
        """Remove what a rebuild cut short left."""
        ...

    def spill(self, records: list[dict[str, Any]], refs: "PackedRefs", *, replace: bool) -> None:
        """Write a fold's index records so far."""
        ...

    def swap_in(self) -> None:
        """Take the live state's place (under the chain lock)."""
        ...


class _Aside:
    """The caller's ports, with the derived state being built aside in place of the live one."""

    def __init__(self, deps: CounterDeps, states: AsideStore) -> None:
        self._deps = deps
        self.states = states

    def __getattr__(self, name: str) -> Any:
        return getattr(self._deps, name)


class _AtHead:
    """A read of the chain as far as ``head``, without its lock (a fold of a verified prefix)."""

    def __init__(self, head: Head | None) -> None:
        self._head = head

    def head(self) -> Head | None:
        return self._head


def aside_deps(deps: CounterDeps, aside: AsideStore) -> CounterDeps:
    """``deps`` folding into ``aside`` rather than the live state."""
    return cast("CounterDeps", _Aside(deps, aside))


def fold_aside(deps: CounterDeps, aside: AsideStore) -> Counter:
    """Fold the verified chain up to its head now into ``aside``, without the chain lock.

    Raises:
        LedgerError: the chain does not verify (run ``ledger recover``).
        ChainIOError: the chain cannot be read, or the state aside written.
    """
    aside.clear()
    head = deps.chain.head()
    counter = load_counter(cast("ChainTx", _AtHead(head)), aside_deps(deps, aside))
    if counter.problem is not None:
        raise LedgerError(f"cannot rebuild derived state: {counter.problem}")
    _save(counter, aside)
    return counter


def catch_up(tx: ChainTx, deps: CounterDeps, aside: AsideStore) -> Counter:
    """The state aside, caught up with the entries appended since it was folded (under the lock).

    Raises:
        LedgerError: the chain's new entries do not verify, or it was cut or
            replaced meanwhile (``ledger recover``).
    """
    counter = load_counter(tx, aside_deps(deps, aside))
    if counter.problem is not None:
        raise LedgerError(f"cannot rebuild derived state: {counter.problem}")
    return counter


def save_aside(counter: Counter, aside: AsideStore) -> None:
    """Save the state aside and put it in the live one's place (under the chain lock).

    Raises:
        ChainIOError: it cannot be written or moved (the live state then stays,
            or is missing and folded afresh on the next use).
    """
    _save(counter, aside)
    aside.swap_in()


def _save(counter: Counter, aside: AsideStore) -> None:
    save_counter(counter, aside)
    if counter.dirty:
        # ``save_counter`` lets a state that cannot be written lag: here it must be whole.
        raise ChainIOError("cannot write the rebuilt derived state")
