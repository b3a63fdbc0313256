"""One pass over the chain in constant memory: verify, build the tree root, mark the end.

Lines are read one at a time from the store (a file or a database: both give
positions through ``iter_lines``); each is checked as ``verify-chain`` checks
it, and each verified entry's hash is fed to a Merkle ``RootBuilder`` that keeps
only the tree's right edge. Nothing grows with the chain but the counts.

A pass may start at a ``VerifiedMark`` (the end of a prefix a signed
checkpoint vouches for, whose bytes hash as they did) instead of the first
line: then it checks only the entries after it, and its report counts the
whole chain. Each pass hashes the bytes it verified, for the next mark.
"""

import hashlib
from dataclasses import dataclass

from ledger.core.chain import ChainReport, ChainVerifier
from ledger.core.envelope import GENESIS, EnvelopeFormatError, ParsedEntry, parse_line
from ledger.core.merkle import RootBuilder, leaf_hash
from ledger.core.trust import TrustStore, trust_fingerprint
from ledger.core.verified_mark import VerifiedMark
from ledger.errors import ChainIOError
from ledger.services.ports import ChainStore


@dataclass(frozen=True, slots=True)
class StreamedChain:
    """What one pass found: the report, the tree root and where it ended."""

    report: ChainReport
    root_hash: str | None
    mark: VerifiedMark | None
    hash_at: str | None


class Resume:
    """A mark whose prefix was found unchanged, and the prefix's hash so far (to go on)."""

    def __init__(self, mark: VerifiedMark, digest: "hashlib._Hash") -> None:
        self.mark = mark
        self.digest = digest


def prefix_unchanged(store: ChainStore, mark: VerifiedMark) -> Resume | None:
    """The mark with its prefix's running hash, when the prefix's bytes are as verified.

    Reads the prefix once in constant memory, hashing it (no parsing, no
    signature checks); ``None`` when a byte differs, the chain is shorter, or it
    cannot be read.
    """
    digest = hashlib.sha256()
    read = 0
    try:
        for raw in store.iter_lines(0, mark.position):
            digest.update(raw)
            read += len(raw)
    except ChainIOError:
        return None
    if read != mark.position or digest.hexdigest() != mark.prefix_sha256:
        return None
    return Resume(mark, digest)


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
    """The running state of one pass: positions, the tree, the prefix hash, a hash asked for."""

    def __init__(self, resume: Resume | None, hash_at_count: int | None) -> None:
        mark = resume.mark if resume is not None else None
        self.builder = mark.root_builder() if mark is not None else RootBuilder()
        self.digest = resume.digest.copy() if resume is not None else hashlib.sha256()
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
    state = _Pass(resume, hash_at_count)
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
        state.digest.update(raw)
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
    if state.position != state.head_end:  # skipped markers after the head: no mark
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
    )
    return StreamedChain(report, state.builder.root().hex(), mark, state.hash_at)
