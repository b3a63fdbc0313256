"""Finding an entry by its hash or a prefix of it, through the derived index (SPEC §21).

The index knows every entry up to the stored state's head (its refs are
saved before the state); the few entries sealed since are read from the
chain. So ``explain REF``, ``prove inclusion REF`` and ``record
--verdict-ref`` find an entry in O(log n), and a prefix that names two
entries is found out without reading the chain. Each answer is checked
against the chain itself (the entry at the line the index names must have
that hash); when the index cannot answer (no state, a state of an older
version, a damaged row, a stale answer) the whole chain is read instead:
slower, never wrong.
"""

from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol

from ledger.core.refs import FULL_REF_DIGITS
from ledger.errors import ChainIOError, InputDataError, LedgerError, StateMismatchError
from ledger.services.ports import ChainStore, RefMatchLike, StateStore


class FoundEntry(NamedTuple):
    """An entry found by (a prefix of) its hash: its whole hash and its line from 1."""

    entry_hash: str
    line: int


class RefDeps(Protocol):
    """What finding an entry needs."""

    @property
    def chain(self) -> ChainStore:
        """The chain."""
        ...

    @property
    def states(self) -> StateStore:
        """The derived state and its index."""
        ...


def find_entries(deps: RefDeps, prefix: str, limit: int = 2) -> list[FoundEntry]:
    """Up to ``limit`` entries whose hash begins with ``prefix``, in chain order.

    Raises:
        ChainIOError: the chain cannot be read.
    """
    return find_in(deps.chain, deps.states, prefix, limit)


def find_in(
    chain: ChainStore, states: StateStore | None, prefix: str, limit: int = 2
) -> list[FoundEntry]:
    """``find_entries`` given the chain and its derived state (``None``: none: a scan).

    Raises:
        ChainIOError: the chain cannot be read.
    """
    indexed = None if states is None else _indexed(chain, states, prefix, limit)
    if indexed is None:
        return _scan(chain, prefix, 0, 0, limit)
    return indexed


def _indexed(
    chain: ChainStore, states: StateStore, prefix: str, limit: int
) -> list[FoundEntry] | None:
    """The index's answer, with the entries sealed after the state; ``None``: it has none."""
    finder = getattr(states, "find_refs", None)
    if finder is None:
        return None
    try:
        stored = states.load()
        if stored is None or not getattr(stored, "index_complete", True):
            return None
        matches: list[RefMatchLike] = list(finder(prefix, limit))
    except (LedgerError, ValueError):
        return None
    found: dict[str, FoundEntry] = {}
    for match in matches:
        where = match.position
        if where.offset is None or not holds(chain, where.offset, match.entry_hash):
            return None  # an answer the chain does not bear out: read it all
        found[match.entry_hash] = FoundEntry(match.entry_hash, where.entry)
    entries = int(stored.data.get("meta", {}).get("entries", 0))
    for tail in _scan(chain, prefix, stored.size, entries, limit):
        found.setdefault(tail.entry_hash, tail)
    return sorted(found.values(), key=lambda entry: entry.line)[:limit]


def holds(store: ChainStore, offset: int, entry_hash: str) -> bool:
    """Whether the chain's line at byte ``offset`` is the entry ``entry_hash``."""
    from ledger.core.envelope import parse_line

    try:
        raw = next(iter(store.iter_lines(offset)), b"")
        return parse_line(raw.rstrip(b"\n")).entry_hash == entry_hash
    except (ValueError, InputDataError, ChainIOError, StateMismatchError):
        return False


def _scan(store: ChainStore, prefix: str, start: int, line: int, limit: int) -> list[FoundEntry]:
    """Entries from byte ``start`` (line ``line`` + 1 on) whose hash begins with ``prefix``."""
    found = []
    for number, entry_hash in _hashes(store, start, line):
        if entry_hash.startswith(prefix):
            found.append(FoundEntry(entry_hash, number))
            if len(found) >= limit or len(prefix) == FULL_REF_DIGITS:
                break
    return found


def _hashes(store: ChainStore, start: int, line: int) -> Iterator[tuple[int, str]]:
    from ledger.core.envelope import parse_line

    for raw in store.iter_lines(start):
        line += 1
        try:
            yield line, parse_line(raw.rstrip(b"\n")).entry_hash
        except (ValueError, InputDataError):
            continue


def describe(found: list[Any]) -> str:
    """The lines of several entries, for a message."""
    return ", ".join(str(entry.line) for entry in found)
