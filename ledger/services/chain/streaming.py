"""One pass over the chain in constant memory: verify, build the tree root, mark the end.

Lines are read one at a time from the store (a file or a database: both give
positions through ``iter_lines``); each is checked as ``verify-chain`` checks
it, and each verified entry's hash is fed to a Merkle ``RootBuilder`` that keeps
only the tree's right edge. Nothing grows with the chain but the counts.

A pass may start at a ``VerifiedMark`` (the end of a prefix a signed
checkpoint vouches for, whose bytes hash as they did) instead of the first
line: then it checks only the entries after it, and its report counts the
whole chain. Each pass hashes the bytes it verified, for the next mark.

A store that can stamp its sealed segments (``SealedStamps``: the file store)
lets a pass skip hashing them: the mark keeps their stamps, taken before the
pass read anything and found the same after it, and hashes only the bytes
after the last one (``ledger.core.verified_mark`` says why a stamp is enough
for an incremental check, and what only ``--full`` rules out). A stamp that
differs now makes the mark unusable, so the segment is read and verified
again; a pass whose stamps changed while it ran keeps no mark.
"""

import hashlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ledger.core.chain import ChainReport, ChainVerifier
from ledger.core.envelope import GENESIS, EnvelopeFormatError, ParsedEntry, parse_line
from ledger.core.merkle import RootBuilder, leaf_hash
from ledger.core.trust import TrustStore, trust_fingerprint
from ledger.core.verified_mark import SealedStamp, VerifiedMark
from ledger.errors import ChainIOError
from ledger.services.ports import ChainStore


@dataclass(frozen=True, slots=True)
class StreamedChain:
    """What one pass found: the report, the tree root and where it ended."""

    report: ChainReport
    root_hash: str | None
    mark: VerifiedMark | None
    hash_at: str | None


@runtime_checkable
class SealedStamps(Protocol):
    """A store whose sealed segments can be stamped by file identity (the file store)."""

    def sealed_stamps(self, end: int | None = None) -> tuple[SealedStamp, ...]:
        """Stamps of segments 1, 2, … that end at or before ``end``, up to the first unstampable."""
        ...


def stamps_of(store: ChainStore, end: int | None) -> tuple[SealedStamp, ...]:
    """The store's stamps of its sealed segments ending by ``end``; none for other stores."""
    if not isinstance(store, SealedStamps):
        return ()
    try:
        return store.sealed_stamps(end)
    except ChainIOError:
        return ()


class Resume:
    """A mark whose prefix was found unchanged, and the hash of its tail (to go on).

    ``stamps`` are every sealed segment's, taken before the prefix was read;
    ``digest`` covers the prefix's bytes from ``hashed_from`` (the end of the
    last of them inside the prefix) to the mark.
    """

    def __init__(
        self,
        mark: VerifiedMark,
        digest: "hashlib._Hash",
        hashed_from: int = 0,
        stamps: tuple[SealedStamp, ...] = (),
    ) -> None:
        self.mark = mark
        self.digest = digest
        self.hashed_from = hashed_from
        self.stamps = stamps


def prefix_unchanged(store: ChainStore, mark: VerifiedMark) -> Resume | None:
    """The mark with its tail's running hash, when the prefix is as verified.

    Every sealed segment the mark stamps must have the same stamp now (none of
    its bytes is read); the bytes after the last of them are read once in
    constant memory and hashed (no parsing, no signature checks). ``None``
    when a stamp or a byte differs, the chain is shorter, or it cannot be read.
    A segment sealed since the mark is stamped now, before its bytes are
    read, and the returned hash starts after the last one inside the prefix.
    """
    now = stamps_of(store, None)
    if now[: len(mark.sealed)] != mark.sealed:
        return None
    start = mark.hashed_from
    inside = [stamp for stamp in now if stamp.end <= mark.position]
    tail_from = inside[-1].end if inside else 0
    digest = hashlib.sha256()
    tail = hashlib.sha256()
    read = start
    try:
        for raw in store.iter_lines(start, mark.position):
            digest.update(raw)
            if read >= tail_from:
                tail.update(raw)
            read += len(raw)
    except ChainIOError:
        return None
    if read != mark.position or digest.hexdigest() != mark.prefix_sha256:
        return None
    return Resume(mark, tail, tail_from, now)


def mark_holds(store: ChainStore, mark: VerifiedMark) -> bool:
    """Whether the chain still has the mark's head on its line and begins as it did.

    Two short reads, whatever the length: a chain recovered or replaced since
    the mark was made fails.
    """
    return (
        _hash_of_span(store, mark.line_start, mark.position) == mark.head_hash
        and _first_hash(store) == mark.chain_id
    )


def _hash_of_span(store: ChainStore, start: int, end: int) -> str | None:
    lines = list(store.iter_lines(start, end))
    if len(lines) != 1 or not lines[0].endswith(b"\n"):
        return None
    try:
        return parse_line(lines[0][:-1]).entry_hash
    except EnvelopeFormatError:
        return None


def _first_hash(store: ChainStore) -> str | None:
    for raw in store.iter_lines(0):
        if not raw.endswith(b"\n"):
            return None
        try:
            return parse_line(raw[:-1]).entry_hash
        except EnvelopeFormatError:
            return None
    return None


class _Pass:
    """The running state of one pass: positions, the tree, the prefix hash, a hash asked for.

    Only lines from ``hashed_from`` (the end of the last stamped segment) are
    hashed; ``markable`` is ``False`` when the hash cannot cover exactly that.
    """

    def __init__(
        self, resume: Resume | None, hash_at_count: int | None, stamps: tuple[SealedStamp, ...]
    ) -> None:
        mark = resume.mark if resume is not None else None
        self.stamps = stamps
        self.hashed_from = stamps[-1].end if stamps else 0
        self.markable = True
        self.digest = hashlib.sha256()
        if resume is not None:
            # A segment holding bytes of the prefix must be as the resume found
            # it before reading them (this pass does not read them again), and
            # the tail's hash goes on only when it starts where this pass's does.
            starts = (0, *(stamp.end for stamp in stamps))
            held = sum(1 for start in starts[: len(stamps)] if start < resume.mark.position)
            self.markable = stamps[:held] == resume.stamps[:held]
            if self.hashed_from <= resume.mark.position:
                self.markable = self.markable and resume.hashed_from == self.hashed_from
                self.digest = resume.digest.copy()
        self.builder = mark.root_builder() if mark is not None else RootBuilder()
        self.line_start = mark.line_start if mark is not None else 0
        self.position = mark.position if mark is not None else 0
        self.head_start = self.line_start
        self.head_end = self.position
        self.want = hash_at_count
        self.hash_at: str | None = None

    def entry(self, parsed: ParsedEntry) -> None:
        self.builder.add(leaf_hash(bytes.fromhex(parsed.entry_hash)))
        self.head_start, self.head_end = self.line_start, self.position
        if self.builder.size == self.want:
            self.hash_at = parsed.entry_hash


def stream_verify(
    store: ChainStore,
    trust: TrustStore,
    *,
    resume: Resume | None = None,
    end: int | None = None,
    strict: bool = False,
    allow_markers: bool = False,
    hash_at_count: int | None = None,
) -> StreamedChain:
    """Verify the chain (after ``resume`` when given) up to position ``end``.

    Args:
        store: the chain.
        trust: keys that may sign.
        resume: a mark the caller has checked (``mark_fits``, ``prefix_unchanged``).
        end: where to stop (a line boundary); the chain's end when ``None``.
        strict: every entry must be signed.
        allow_markers: skip lines beginning with ``[`` instead of failing them.
        hash_at_count: also return the hash of entry number ``hash_at_count``
            (to hold the chain to a checkpoint) when the pass reaches it.

    Raises:
        ChainIOError: the chain cannot be read.
    """
    # Stamped before any byte is read: a segment changed while it is read
    # differs from its stamp afterwards, and the pass keeps no mark.
    state = _Pass(resume, hash_at_count, stamps_of(store, end))
    mark = resume.mark if resume is not None else None
    verifier = ChainVerifier(
        trust,
        strict=strict,
        allow_markers=allow_markers,
        expected_prev=GENESIS if mark is None else mark.head_hash,
        first_line=1 if mark is None else mark.lines + 1,
        on_entry=state.entry,
    )
    failed: tuple[int, str] | None = None
    for raw in store.iter_lines(state.position, end):
        state.line_start, state.position = state.position, state.position + len(raw)
        try:
            if not verifier.feed(raw):
                break
        except ValueError as exc:  # a ts_utc of the right shape but no calendar time
            failed = ((mark.lines if mark else 0) + verifier.report().lines, str(exc))
            break
        if state.line_start >= state.hashed_from:
            state.digest.update(raw)
    if state.stamps and stamps_of(store, state.head_end) != state.stamps:
        state.markable = False
    return _result(verifier.report(), state, mark, failed, trust_fingerprint(trust))


def _result(
    new: ChainReport,
    state: _Pass,
    resume: VerifiedMark | None,
    failed: tuple[int, str] | None,
    trust_sha256: str,
) -> StreamedChain:
    entries = new.entries + (resume.entries if resume else 0)
    lines = new.lines + (resume.lines if resume else 0)
    genesis = resume.chain_id if resume is not None else new.genesis_hash
    head = new.head_hash if new.entries else (resume.head_hash if resume else None)
    head_ts = new.head_ts if new.entries else (resume.head_ts if resume else None)
    if failed is not None:
        line, reason = failed
        report = ChainReport(False, entries, lines, line, f"malformed entry: {reason}")
        return StreamedChain(report, None, None, state.hash_at)
    report = ChainReport(
        new.ok, entries, lines, new.line, new.reason, GENESIS, genesis, head, head_ts
    )
    if not new.ok or genesis is None or head is None or head_ts is None:
        return StreamedChain(report, None, None, state.hash_at)
    if state.position != state.head_end or not state.markable:
        # Markers skipped after the head, or stamps that changed meanwhile: no mark.
        return StreamedChain(report, state.builder.root().hex(), None, state.hash_at)
    mark = VerifiedMark(
        chain_id=genesis,
        entries=entries,
        lines=lines,
        line_start=state.head_start,
        position=state.head_end,
        head_hash=head,
        head_ts=head_ts,
        frontier=tuple(node.hex() for node in state.builder.frontier()),
        prefix_sha256=state.digest.hexdigest(),
        trust_sha256=trust_sha256,
        sealed=state.stamps,
    )
    return StreamedChain(report, state.builder.root().hex(), mark, state.hash_at)
