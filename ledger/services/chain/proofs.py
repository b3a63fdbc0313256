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
from ledger.core.envelope import parse_line
from ledger.core.merkle import (
    RootBuilder,
    consistency_path,
    inclusion_path,
    leaf_hash,
    root,
    verify_consistency,
    verify_inclusion,
)
from ledger.errors import LedgerError, UsageError
from ledger.services.chain.merkle_sync import NodeIndex, catch_up
from ledger.services.ports import ChainStore

_STALE = "the Merkle index does not match the chain: run `ledger verify-chain --full` to rebuild it"


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
