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

Sealed segments (format 2) are not hashed again: the mark stamps each sealed
segment inside the prefix by its file's identity — device, inode, size,
``mtime_ns``, ``ctime_ns`` and the SHA-256 of its manifest — taken before its
bytes were read and found unchanged after, and ``prefix_sha256`` covers only
the bytes after the last stamped segment (``hashed_from`` on). A segment whose
stamp differs now is read and verified again. Why a stamp is enough for an
incremental check: writing to a file changes its ``mtime`` and its ``ctime``;
``os.utime`` can set the ``mtime`` back but itself sets the ``ctime`` to now,
and no call from user space sets a ``ctime`` back; replacing the file (a
rename over it, a copy and a move) gives it another inode. Only someone who
can set the system clock back (root) or write the disk's blocks beneath the
file system could keep a stamp while changing bytes — and someone who can
write the home can rewrite this unsigned mark as well, today's prefix hash
included. An incremental run is the operator's quick check of what was added;
``verify-chain --full`` is the auditor's, and trusts no stamp and no mark.

A mark of format 1 (a hash over the whole prefix, no stamps) is still read:
it is never believed, so the next verification starts at line 1 as if there
were none, and writes a mark of format 2.
"""

from dataclasses import dataclass
from typing import Any

from ledger.core.checkpoint import Checkpoint
from ledger.core.merkle import RootBuilder

MARK_FORMAT = "ledger-verified-mark/2"


@dataclass(frozen=True, slots=True)
class SealedStamp:
    """A sealed segment's file identity when its bytes verified (see the module's docstring)."""

    number: int
    end: int  # the whole chain's position just after the segment
    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    manifest_sha256: str

    def to_document(self) -> dict[str, Any]:
        """The JSON form inside the mark.

        Device, inode and times are decimal strings: they exceed the integers
        canonical JSON carries exactly (2⁵³).
        """
        return {
            "number": self.number,
            "end": self.end,
            "device": str(self.device),
            "inode": str(self.inode),
            "size": self.size,
            "mtime_ns": str(self.mtime_ns),
            "ctime_ns": str(self.ctime_ns),
            "manifest_sha256": self.manifest_sha256,
        }


def stamp_from_document(document: Any) -> SealedStamp:
    """A stamp read back.

    Raises:
        KeyError, TypeError, ValueError: the document is not a stamp.
    """
    return SealedStamp(
        number=int(document["number"]),
        end=int(document["end"]),
        device=int(document["device"]),
        inode=int(document["inode"]),
        size=int(document["size"]),
        mtime_ns=int(document["mtime_ns"]),
        ctime_ns=int(document["ctime_ns"]),
        manifest_sha256=str(document["manifest_sha256"]),
    )


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
    prefix_sha256: str  # of the bytes from ``hashed_from`` to ``position``
    trust_sha256: str
    sealed: tuple[SealedStamp, ...] = ()  # segments 1, 2, … up to ``hashed_from``

    @property
    def hashed_from(self) -> int:
        """Where the bytes ``prefix_sha256`` covers begin: after the last stamped segment."""
        return self.sealed[-1].end if self.sealed else 0

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
            "sealed": [stamp.to_document() for stamp in self.sealed],
        }

    def root_builder(self) -> RootBuilder:
        """A tree builder that goes on after this prefix.

        Raises:
            ValueError: the stored right edge does not fit the entry count.
        """
        return RootBuilder.resumed(self.entries, [bytes.fromhex(node) for node in self.frontier])


def mark_from_document(document: Any) -> VerifiedMark | None:
    """A mark read back, or ``None`` when the document is not one (it is only a cache).

    A mark of an older format is ``None`` too: it is only a cache, so the next
    verification checks from line 1 and keeps a mark of this format.
    """
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
            sealed=tuple(stamp_from_document(stamp) for stamp in document["sealed"]),
        )
        mark.root_builder()
    except (KeyError, TypeError, ValueError):
        return None
    if mark.entries < 1 or mark.lines < mark.entries or not 0 <= mark.line_start < mark.position:
        return None
    numbers = [stamp.number for stamp in mark.sealed]
    ends = [stamp.end for stamp in mark.sealed]
    if numbers != list(range(1, len(numbers) + 1)) or ends != sorted(ends):
        return None
    if mark.hashed_from > mark.position:
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
