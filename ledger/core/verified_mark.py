"""Where a verification may resume: a verified prefix tied to a signed checkpoint.

The chain is append-only, so a prefix that verified once stays verified: the
next ``verify-chain`` only needs the entries after it. A mark records where
such a prefix ends — the checkpoint's entry count and head, the line the head
is on (``line_start`` to ``position``: bytes for a file, the same positions
for a database) and the right edge of the Merkle tree over it (its
``frontier``) — so that verifying and checkpointing can go on from there in
O(new entries) time and O(log n) memory.

A mark is not signed; it is only believed where it agrees with a checkpoint
that is: the same chain, entry count and head hash, and a right edge whose root
is the checkpoint's signed tree root. It also holds the SHA-256 of the prefix's
bytes and the fingerprint of the trust store it was verified under: the reader
hashes the prefix again (a plain hash runs hundreds of times faster than
checking signatures, in constant memory) and resumes only when both are
unchanged, so a byte edited inside the verified prefix, or a key revoked
since, sends the verification back to line 1. ``verify-chain --full`` (and the
daemon's periodic verification) checks every entry's signature again anyway.
"""

from dataclasses import dataclass
from typing import Any

from ledger.core.checkpoint import Checkpoint
from ledger.core.merkle import RootBuilder

MARK_FORMAT = "ledger-verified-mark/1"


@dataclass(frozen=True, slots=True)
class VerifiedMark:
    """The end of a verified prefix of the chain."""

    chain_id: str
    entries: int
    lines: int
    line_start: int
    position: int
    head_hash: str
    head_ts: str
    frontier: tuple[str, ...]
    prefix_sha256: str
    trust_sha256: str

    def to_document(self) -> dict[str, Any]:
        """The JSON form stored beside the checkpoints."""
        return {
            "format": MARK_FORMAT,
            "chain_id": self.chain_id,
            "entries": self.entries,
            "lines": self.lines,
            "line_start": self.line_start,
            "position": self.position,
            "head_hash": self.head_hash,
            "head_ts": self.head_ts,
            "frontier": list(self.frontier),
            "prefix_sha256": self.prefix_sha256,
            "trust_sha256": self.trust_sha256,
        }

    def root_builder(self) -> RootBuilder:
        """A tree builder that goes on after this prefix.

        Raises:
            ValueError: the stored right edge does not fit the entry count.
        """
        return RootBuilder.resumed(self.entries, [bytes.fromhex(node) for node in self.frontier])


def mark_from_document(document: Any) -> VerifiedMark | None:
    """A mark read back, or ``None`` when the document is not one (it is only a cache)."""
    try:
        if document["format"] != MARK_FORMAT:
            return None
        mark = VerifiedMark(
            chain_id=str(document["chain_id"]),
            entries=int(document["entries"]),
            lines=int(document["lines"]),
            line_start=int(document["line_start"]),
            position=int(document["position"]),
            head_hash=str(document["head_hash"]),
            head_ts=str(document["head_ts"]),
            frontier=tuple(str(node) for node in document["frontier"]),
            prefix_sha256=str(document["prefix_sha256"]),
            trust_sha256=str(document["trust_sha256"]),
        )
        mark.root_builder()
    except (KeyError, TypeError, ValueError):
        return None
    if mark.entries < 1 or mark.lines < mark.entries or not 0 <= mark.line_start < mark.position:
        return None
    return mark


def mark_fits(mark: VerifiedMark, checkpoint: Checkpoint, trust_sha256: str) -> bool:
    """Whether ``mark`` ends where the (signature-checked) ``checkpoint`` vouches for.

    The same chain, count and head, a right edge whose root is the checkpoint's
    tree root (a checkpoint without one vouches for no mark), and the same
    trust store as now.
    """
    if checkpoint.root_hash is None or mark.trust_sha256 != trust_sha256:
        return False
    return (
        mark.chain_id == checkpoint.chain_id
        and mark.entries == checkpoint.entries
        and mark.head_hash == checkpoint.head_hash
        and mark.root_builder().root().hex() == checkpoint.root_hash
    )
