"""Merkle tree heads, inclusion and consistency proofs over the chain (SPEC §10).

The node index is derived state behind the ``NodeIndex`` port (a folder of
level files for the file store; a table for a database store). It is caught up
lazily: a command that needs it reads the entries appended since its mark and
adds them, O(new entries), under the chain's shared lock and the index's own
lock. The per-call append path never touches it.

Trust: a proof is only as good as the root it is checked against. ``prove``
refuses to print a proof whose root differs from the checkpoint it names, and
checkpoints take their root from the verified chain itself (a tree built
while the entries are verified, ``ledger.services.chain.streaming``), never
from the index.
"""

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from ledger.core.checkpoint import Checkpoint
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.merkle import (
    IndexMark,
    NodeSource,
    RootBuilder,
    consistency_path,
    inclusion_path,
    leaf_hash,
    node_hash,
    root,
    verify_consistency,
    verify_inclusion,
)
from ledger.errors import ChainBrokenError, LedgerError, UsageError
from ledger.services.ports import ChainStore

# Entries added to the node index per write: enough to amortise a write per
# level, few enough that catching up holds a few MiB whatever the chain length.
_BATCH = 8192
_STALE = "the Merkle index does not match the chain: run `ledger verify-chain --full` to rebuild it"


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


class ProofDeps(Protocol):
    """What proving needs from the composition root."""

    @property
    def chain(self) -> ChainStore:
        """The home's chain."""
        ...

    def merkle_index(self) -> AbstractContextManager[NodeIndex]:
        """The node index, open for one command."""
        ...

    def exclusive(
        self, name: str, wait_seconds: float | None = None
    ) -> AbstractContextManager[None]:
        """A named lock in the home."""
        ...

    def newest_checkpoint(self) -> Checkpoint | None:
        """The home's newest checkpoint."""
        ...


class ProofError(LedgerError):
    """No proof can be made (exit 1): unknown entry, no tree head, a mismatch."""


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


def tree_root_of_lines(lines: Iterable[bytes], then: Sequence[str] = ()) -> str:
    """The tree root over the entries of verified lines, then of entry hashes ``then``.

    For snapshots and recovery, which hold the verified lines in memory.

    Raises:
        EnvelopeFormatError: a line is not an entry.
    """
    builder = RootBuilder()
    for raw in lines:
        line = raw.rstrip(b"\n")
        if line.startswith(b"["):
            continue
        builder.add(leaf_hash(bytes.fromhex(parse_line(line).entry_hash)))
    for entry_hash in then:
        builder.add(leaf_hash(bytes.fromhex(entry_hash)))
    return builder.root().hex()


@dataclass(frozen=True, slots=True)
class InclusionProof:
    """``prove inclusion``'s output."""

    leaf_index: int
    tree_size: int
    root_hash: str
    entry_hash: str
    audit_path: list[str]

    def to_document(self) -> dict[str, Any]:
        """The JSON form, as printed and as read back by ``verify-proof``."""
        return {
            "leaf_index": self.leaf_index,
            "tree_size": self.tree_size,
            "root_hash": self.root_hash,
            "entry_hash": self.entry_hash,
            "audit_path": self.audit_path,
        }


@dataclass(frozen=True, slots=True)
class ConsistencyProof:
    """``prove consistency``'s output."""

    old_size: int
    new_size: int
    old_root: str
    new_root: str
    proof: list[str]

    def to_document(self) -> dict[str, Any]:
        """The JSON form, as printed and as read back by ``verify-proof``."""
        return {
            "old_size": self.old_size,
            "new_size": self.new_size,
            "old_root": self.old_root,
            "new_root": self.new_root,
            "proof": self.proof,
        }


def _tree_head(checkpoint: Checkpoint | None, what: str) -> tuple[int, str]:
    if checkpoint is None:
        raise ProofError("no checkpoint in the home: run `ledger checkpoint` first")
    if checkpoint.tree_size is None or checkpoint.root_hash is None:
        raise ProofError(
            f"{what} has no tree head (written before Merkle roots): "
            "run `ledger checkpoint` for a new one"
        )
    return checkpoint.tree_size, checkpoint.root_hash


@contextmanager
def _caught_up(deps: ProofDeps) -> Iterator[tuple[NodeIndex, int]]:
    with (
        deps.chain.read_transaction(),
        deps.exclusive("merkle-index"),
        deps.merkle_index() as index,
    ):
        yield index, catch_up(index, deps.chain)


def _check_root(index: NodeIndex, held: int, size: int, expected: str, what: str) -> None:
    if size > held:
        raise ProofError(f"{what} has {size} entries, the chain {held}")
    actual = root(index, size).hex()
    if actual != expected:
        raise ProofError(
            f"the chain's tree at {size} entries has root {actual}, {what} says {expected}: "
            "run `ledger verify-chain`"
        )


def prove_inclusion(
    deps: ProofDeps, target: int | str, checkpoint: Checkpoint | None = None
) -> InclusionProof:
    """The audit path of one entry (by number from 1, or by entry hash) to a tree head.

    The tree head is ``checkpoint``'s, else the home's newest checkpoint's.

    Raises:
        ProofError: no usable tree head, an unknown entry, or a root mismatch.
        ChainIOError, LockTimeoutError: the chain or index cannot be read.
    """
    size, expected = _tree_head(
        checkpoint or deps.newest_checkpoint(),
        "the checkpoint" if checkpoint is not None else "the newest checkpoint",
    )
    with _caught_up(deps) as (index, held):
        _check_root(index, held, size, expected, "the checkpoint")
        if isinstance(target, int):
            position = target - 1
            if not 0 <= position < size:
                raise ProofError(f"entry {target} is not among the checkpoint's {size} entries")
        else:
            position = _position_of(deps, index, target, size)
        path = inclusion_path(index, position, size)
        entry_raw = index.entry(position)
        # A stored node off the root's own path could still be wrong: never
        # print a proof that would not verify.
        if not verify_inclusion(
            position, size, leaf_hash(entry_raw), path, bytes.fromhex(expected)
        ):
            raise ProofError(_STALE)
    return InclusionProof(position, size, expected, entry_raw.hex(), [p.hex() for p in path])


def _position_of(deps: ProofDeps, index: NodeIndex, target: str, size: int) -> int:
    """Where the entry ``target`` (a hash or a prefix of one) is, from 0, found by its ref.

    The ref index names the line (``ledger.services.chain.refs``); the node
    index's leaf there must be that hash, else the leaves are searched.

    Raises:
        UsageError: the prefix names more than one entry.
        ProofError: no entry among the checkpoint's has that hash.
    """
    from ledger.services.chain.refs import describe, find_in

    found = find_in(deps.chain, getattr(deps, "states", None), target)
    if len(found) > 1:
        raise UsageError(
            f"{target} matches more than one entry (lines {describe(found)}): give more digits"
        )
    if found and 0 <= found[0].line - 1 < size:
        position = found[0].line - 1
        if index.entry(position) == bytes.fromhex(found[0].entry_hash):
            return position
    if found:
        searched = index.find_entry(bytes.fromhex(found[0].entry_hash), size)
        if searched is not None:
            return searched
    raise ProofError(f"no entry {target} among the checkpoint's {size} entries")


def prove_consistency(deps: ProofDeps, old: Checkpoint, new: Checkpoint) -> ConsistencyProof:
    """That ``new``'s tree extends ``old``'s: RFC 9162 §2.1.4 over the home's chain.

    Raises:
        ProofError: a checkpoint without a tree head, out of order, or not of this chain.
        ChainIOError, LockTimeoutError: the chain or index cannot be read.
    """
    old_size, old_root = _tree_head(old, "OLD_CHECKPOINT")
    new_size, new_root = _tree_head(new, "NEW_CHECKPOINT")
    if old_size > new_size:
        raise ProofError(f"OLD_CHECKPOINT has {old_size} entries, NEW_CHECKPOINT {new_size}")
    with _caught_up(deps) as (index, held):
        _check_root(index, held, old_size, old_root, "OLD_CHECKPOINT")
        _check_root(index, held, new_size, new_root, "NEW_CHECKPOINT")
        path = consistency_path(index, old_size, new_size)
        if not verify_consistency(
            old_size, new_size, bytes.fromhex(old_root), bytes.fromhex(new_root), path
        ):
            raise ProofError(_STALE)
    return ConsistencyProof(old_size, new_size, old_root, new_root, [p.hex() for p in path])
