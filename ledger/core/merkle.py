"""RFC 9162 Merkle tree math over the chain's entries (SPEC §10).

Pure functions over hashes: storage supplies nodes through ``NodeSource``, so
the same proofs come from an in-memory list, a file index or a database table
(the Trillian / Tessera split between tree math and tile storage).

Terms (RFC 9162 §2.1.1): the leaf hash of data ``d`` is ``SHA-256(0x00 || d)``;
an interior node is ``SHA-256(0x01 || left || right)``; the tree hash of ``n``
leaves splits them at ``k``, the largest power of two smaller than ``n``. Here
the leaf data of chain entry ``i`` is the 32 raw bytes of its entry hash.

A stored node ``(level, i)`` is the tree hash of the complete, aligned subtree
over leaves ``[i * 2**level, (i + 1) * 2**level)``; every range the RFC's
recursion asks for is either such a subtree or a right edge made of at most
``log2 n`` of them, so a proof reads O(log n) stored nodes.
"""

import hashlib
from collections.abc import Sequence
from typing import NamedTuple, Protocol

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()


class NodeSource(Protocol):
    """Stored nodes of complete subtrees: ``node(level, i)``."""

    def node(self, level: int, index: int) -> bytes:
        """The hash of the complete subtree at ``(level, index)``."""
        ...


class IndexMark(NamedTuple):
    """How far a node index has caught up with the chain.

    ``leaves`` leaves are held; the last of them is the entry ``head_hash``
    whose line runs from ``line_start`` to ``position`` in the chain (bytes
    for a file, rows for a table).
    """

    leaves: int
    line_start: int
    position: int
    head_hash: str


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 || data)`` (RFC 9162 §2.1.1)."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)`` (RFC 9162 §2.1.1)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def split_point(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


class LeafList:
    """A ``NodeSource`` over leaf hashes held in memory (computes upper nodes)."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        self._levels: list[list[bytes]] = [list(leaves)]
        while len(self._levels[-1]) > 1:
            below = self._levels[-1]
            self._levels.append(
                [node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
            )

    def node(self, level: int, index: int) -> bytes:
        """The stored node ``(level, index)``."""
        return self._levels[level][index]


def range_hash(source: NodeSource, start: int, end: int) -> bytes:
    """The tree hash of leaves ``[start, end)`` as RFC 9162's recursion meets them.

    ``start`` must be a multiple of the smallest power of two at least
    ``end - start`` (true of every range the proofs below ask for).
    """
    size = end - start
    if size & (size - 1) == 0:
        level = size.bit_length() - 1
        return source.node(level, start >> level)
    k = split_point(size)
    return node_hash(range_hash(source, start, start + k), range_hash(source, start + k, end))


def root(source: NodeSource, size: int) -> bytes:
    """The tree hash of the first ``size`` leaves (``SHA-256("")`` when empty)."""
    return EMPTY_ROOT if size == 0 else range_hash(source, 0, size)


def root_of_leaves(leaves: Sequence[bytes]) -> bytes:
    """The tree hash of a list of leaf hashes."""
    return root(LeafList(leaves), len(leaves))


class RootBuilder:
    """Streams leaf hashes and keeps only the right edge: O(log n) memory."""

    def __init__(self) -> None:
        self.size = 0
        self._stack: list[bytes] = []

    def add(self, leaf: bytes) -> None:
        """Append one leaf hash."""
        node = leaf
        count = self.size
        while count & 1:
            node = node_hash(self._stack.pop(), node)
            count >>= 1
        self._stack.append(node)
        self.size += 1

    @classmethod
    def resumed(cls, size: int, frontier: Sequence[bytes]) -> "RootBuilder":
        """A builder that has already taken ``size`` leaves whose right edge is ``frontier``.

        Raises:
            ValueError: ``frontier`` is not the right edge of ``size`` leaves
                (one node per bit set in ``size``, each ``HASH_SIZE`` bytes).
        """
        if size < 0 or len(frontier) != size.bit_count():
            raise ValueError(f"a right edge of {size} leaves has {size.bit_count()} nodes")
        if any(len(node) != HASH_SIZE for node in frontier):
            raise ValueError("a node of the right edge is not a hash")
        builder = cls()
        builder.size = size
        builder._stack = list(frontier)
        return builder

    def frontier(self) -> list[bytes]:
        """The right edge: the roots of the complete subtrees, largest first.

        With ``size`` it is all a later builder needs to go on (``resumed``);
        its ``root`` is bound to a signed tree head, so a stored right edge is
        checked by recomputing that root.
        """
        return list(self._stack)

    def root(self) -> bytes:
        """The tree hash of every leaf added so far."""
        if not self._stack:
            return EMPTY_ROOT
        result = self._stack[-1]
        for left in reversed(self._stack[:-1]):
            result = node_hash(left, result)
        return result


def inclusion_path(source: NodeSource, index: int, size: int) -> list[bytes]:
    """``PATH(index, D[size])`` of RFC 9162 §2.1.3.1, from the leaf upwards.

    Raises:
        ValueError: ``index`` is not a leaf of a tree of ``size`` leaves.
    """
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size}")
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        k = split_point(end - start)
        if index < start + k:
            path.append(range_hash(source, start + k, end))
            end = start + k
        else:
            path.append(range_hash(source, start, start + k))
            start += k
    path.reverse()
    return path


def consistency_path(source: NodeSource, old_size: int, new_size: int) -> list[bytes]:
    """``PROOF(old_size, D[new_size])`` of RFC 9162 §2.1.4.1.

    Raises:
        ValueError: not ``0 < old_size <= new_size``.
    """
    if not 0 < old_size <= new_size:
        raise ValueError(f"no consistency proof from {old_size} to {new_size}")
    path: list[bytes] = []
    start, end, m = 0, new_size, old_size
    whole = True  # SUBPROOF's b: the old tree is this subtree's left edge
    while m != end - start:
        k = split_point(end - start)
        if m <= k:
            path.append(range_hash(source, start + k, end))
            end = start + k
        else:
            path.append(range_hash(source, start, start + k))
            start += k
            m -= k
            whole = False
    if not whole:
        path.append(range_hash(source, start, end))
    path.reverse()
    return path


def _shift_while_even(fn: int, sn: int) -> tuple[int, int]:
    while fn & 1 == 0 and fn != 0:
        fn >>= 1
        sn >>= 1
    return fn, sn


def verify_inclusion(
    index: int, size: int, leaf: bytes, path: Sequence[bytes], expected_root: bytes
) -> bool:
    """RFC 9162 §2.1.3.2, literally; ``False`` for any malformed input, never raises."""
    if not 0 <= index < size or any(len(p) != HASH_SIZE for p in path):
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            fn, sn = _shift_while_even(fn, sn)
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == expected_root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, path: Sequence[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2, literally; ``False`` for any malformed input, never raises.

    Equal sizes need an empty proof and equal roots; an empty old tree is
    consistent with anything only with an empty proof.
    """
    if any(len(p) != HASH_SIZE for p in path) or not 0 <= old_size <= new_size:
        return False
    if old_size == new_size:
        return not path and old_root == new_root
    if old_size == 0:
        return not path
    if not path:
        return False
    nodes = list(path)
    if old_size & (old_size - 1) == 0:
        nodes.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = nodes[0]
    for c in nodes[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            fn, sn = _shift_while_even(fn, sn)
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0
