"""Keeping the Merkle node index in step with the chain (SPEC §10).

The node index (``NodeIndex``) is derived state: ``catch_up`` adds the entries
appended since its mark, O(new entries); ``catch_up_checked`` holds its root to
a checkpoint's and ``sync_index`` checks every node, and either starts the index
over from the chain when it differs. The proofs over it are in
``ledger.services.chain.proofs``.
"""

from collections.abc import Iterator, Sequence
from typing import Protocol

from ledger.core.checkpoint import Checkpoint
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.merkle import IndexMark, NodeSource, leaf_hash, node_hash, root
from ledger.errors import ChainBrokenError, LedgerError
from ledger.services.ports import ChainStore

# Entries added to the node index per write: enough to amortise a write per
# level, few enough that catching up holds a few MiB whatever the chain length.
_BATCH = 8192


class NodeIndex(NodeSource, Protocol):
    """Stored tree nodes by level, appended as the chain grows."""

    def mark(self) -> IndexMark | None:
        """How far the index has caught up, or ``None`` if it holds nothing usable."""
        ...

    def append(self, entries: Sequence[bytes], mark: IndexMark) -> None:
        """Add entries (raw entry hashes), their leaves and the parents they complete."""
        ...

    def reset(self) -> None:
        """Drop every node."""
        ...

    def level_bytes(self, level: int, count: int) -> bytes:
        """The first ``count`` nodes of a level, concatenated."""
        ...

    def entry(self, index: int) -> bytes:
        """The raw hash of entry ``index`` (from 0)."""
        ...

    def find_entry(self, entry_hash: bytes, size: int) -> int | None:
        """Where an entry hash is among the first ``size`` entries."""
        ...


def _chain_leaves(store: ChainStore, start: int) -> Iterator[tuple[bytes, int, int, str]]:
    """``(raw entry hash, line start, line end, entry hash)`` of each entry from ``start``.

    Markers are skipped; a torn last line is left for ``recover`` and not indexed.
    """
    position = start
    for raw in store.iter_lines(start):
        if not raw.endswith(b"\n"):
            return
        line_start, position = position, position + len(raw)
        if raw.startswith(b"["):
            continue
        try:
            entry_hash = parse_line(raw[:-1]).entry_hash
        except EnvelopeFormatError as exc:
            raise ChainBrokenError(0, f"an entry at byte {line_start} is malformed: {exc}") from exc
        yield bytes.fromhex(entry_hash), line_start, position, entry_hash


def _mark_holds(store: ChainStore, mark: IndexMark) -> bool:
    lines = list(store.iter_lines(mark.line_start, mark.position))
    if len(lines) != 1 or not lines[0].endswith(b"\n"):
        return False
    try:
        return parse_line(lines[0][:-1]).entry_hash == mark.head_hash
    except EnvelopeFormatError:
        return False


def catch_up(index: NodeIndex, store: ChainStore) -> int:
    """Add the entries appended since the index's mark; returns the leaves held.

    Call with the chain's lock held (shared is enough) and the index's lock.
    A mark that no longer matches the chain (a recovered or replaced chain)
    starts the index over.

    Raises:
        ChainBrokenError: an entry cannot be parsed.
        ChainIOError: the chain or the index cannot be read or written.
    """
    mark = index.mark()
    if mark is not None and mark.leaves > 0 and not _mark_holds(store, mark):
        mark = None
    if mark is None:
        index.reset()
        mark = IndexMark(0, 0, 0, "")
    batch: list[bytes] = []
    for leaf, line_start, position, entry_hash in _chain_leaves(store, mark.position):
        batch.append(leaf)
        mark = IndexMark(mark.leaves + 1, line_start, position, entry_hash)
        if len(batch) >= _BATCH:
            index.append(batch, mark)
            batch = []
    if batch:
        index.append(batch, mark)
    return mark.leaves


def sync_index(index: NodeIndex, store: ChainStore) -> tuple[int, str, bool]:
    """Check every stored node against the chain; rebuild the index if any differs.

    O(n) time, for ``verify-chain --full``; memory O(log n): the chain's
    entries are read one at a time and each node is compared as soon as the
    entries under it are in. Returns ``(leaves, root hex, rebuilt)``.

    Raises:
        ChainBrokenError: an entry cannot be parsed.
        ChainIOError: the chain or the index cannot be read or written.
    """
    size = catch_up(index, store)
    checker = _NodeChecker(index)
    for raw, _line_start, _position, _entry_hash in _chain_leaves(store, 0):
        checker.add(raw)
    same = checker.same and checker.count == size
    if not same:
        index.reset()
        catch_up(index, store)
    return checker.count, root(index, checker.count).hex(), not same


class _NodeChecker:
    """Compares the stored nodes with those the chain's entries make, one entry at a time."""

    def __init__(self, index: NodeIndex) -> None:
        self.index = index
        self.count = 0
        self.same = True
        self._left: list[bytes] = []  # the pending left node of each level

    def _stored_is(self, level: int, position: int, expected: bytes) -> None:
        if not self.same:
            return
        try:
            found = self.index.entry(position) if level < 0 else self.index.node(level, position)
        except LedgerError:
            found = b""
        if found != expected:
            self.same = False

    def add(self, raw: bytes) -> None:
        position = self.count
        self._stored_is(-1, position, raw)
        node, level = leaf_hash(raw), 0
        self._stored_is(level, position, node)
        while position & 1:
            node = node_hash(self._left[level], node)
            level += 1
            position >>= 1
            self._stored_is(level, position, node)
        if level == len(self._left):
            self._left.append(node)
        else:
            self._left[level] = node
        self.count += 1


def catch_up_checked(index: NodeIndex, store: ChainStore, checkpoint: Checkpoint | None) -> bool:
    """Add the entries since the index's mark and hold its root to ``checkpoint``'s.

    O(new entries) and a few node reads: the checkpoint's root was built from
    the verified chain itself. A root that differs (an edited or stale index)
    starts the index over from the chain. Returns whether it was rebuilt.

    Raises:
        ChainBrokenError: an entry cannot be parsed.
        ChainIOError: the chain or the index cannot be read or written.
    """
    held = catch_up(index, store)
    if checkpoint is None or checkpoint.tree_size is None or checkpoint.root_hash is None:
        return False
    if checkpoint.tree_size > held:
        return False
    try:
        same = root(index, checkpoint.tree_size).hex() == checkpoint.root_hash
    except LedgerError:
        same = False
    if same:
        return False
    index.reset()
    catch_up(index, store)
    return True
