"""Verifying ``events.jsonl`` on a local disk, in parallel byte ranges when it is large.

A chain below ``_PARALLEL_MIN_BYTES`` is verified in this process, line by line
from ``GENESIS``. A larger one is cut on line boundaries into ranges that shrink
toward the end of the file (``byte_ranges``); a pool of forked workers verifies
the ranges side by side, each without knowing the hash its first line links to,
and ``ledger.core.chain.stitch`` joins their reports, checking the links across
every boundary. Either way the report is the one a serial verify gives.

``ChainFile.verify`` and ``ChainFile.verify_range`` delegate here; this module is
imported only when a chain is verified, so the per-call path never loads it.
"""

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.core.chain import ChainReport, ChainVerifier, stitch
from ledger.core.checkpoint import checkpoint_signature_problem
from ledger.core.envelope import GENESIS
from ledger.edges.files.chainlines import ChainLines
from ledger.edges.files.segmentfiles import Segment, SegmentDir, SegmentGapError, forget_listings

if TYPE_CHECKING:
    from ledger.core.trust import TrustStore
    from ledger.edges.files.chainview import ChainView

# Below this size one process verifies faster than starting a pool.
_PARALLEL_MIN_BYTES = 4 << 20
# Parallel ranges shrink toward the end of the file so that the workers finish
# together: each takes 1 / (_RANGE_SHARE x workers) of the bytes still left, and
# never less than the floor, below which a range's own start-up cost shows.
_RANGE_SHARE = 4
_MIN_RANGE_BYTES = 64 << 10


def verify_file(
    chain: ChainLines,
    trust: "TrustStore",
    *,
    strict: bool = False,
    allow_markers: bool = False,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    end: int | None = None,
) -> ChainReport:
    """Verify the chain up to position ``end``, in parallel byte ranges when it is large.

    Without the lock a writer may be appending: bounded by a head read before,
    a line still being written past it is never read as a torn tail. Sealed
    segments are verified one by one, each from its predecessor's sealed head
    and held to its own signed checkpoint (``segment_problem``).

    Args:
        chain: the chain to verify.
        trust: keys that may sign.
        strict: every entry must be signed.
        allow_markers: skip lines beginning with ``[`` instead of failing them.
        workers: processes to use; the number of CPUs when ``None``.
        progress: called with ``(bytes verified, chain size)`` as each range ends.
        end: where to stop (a line boundary); the chain's size when ``None``.

    Raises:
        ChainIOError: the chain cannot be read.
    """
    try:
        view = _fresh_view(chain)
    except SegmentGapError as exc:
        return ChainReport(False, 0, exc.line - 1, exc.line, str(exc))
    try:
        size = view.size
        sealed = view.segments
        open_start, open_skip = view.base, view.skip
    finally:
        view.close()
    if end is not None:
        size = min(size, end)
    workers = workers or os.cpu_count() or 1
    parallel = size >= _PARALLEL_MIN_BYTES and workers > 1 and not _any_away(chain, sealed)
    if not sealed and not parallel:
        return verify_range(chain, trust, strict, allow_markers, 0, end, from_genesis=True)
    included = [segment for segment in sealed if segment.end <= size]
    # An archived segment nobody gave stands as its signed checkpoint says;
    # the lines after it are verified from its head.
    away = {s.number for s in included if chain.segments is not None and chain.segments.is_away(s)}
    share = max(_MIN_RANGE_BYTES, size // (_RANGE_SHARE * workers))
    groups = [
        segment_ranges(chain, segment, share) if parallel else [(segment.start, segment.end)]
        for segment in included
    ]
    bounds = [bound for group in groups for bound in group]
    if size > open_start:
        if parallel:
            bounds += byte_ranges(chain, size, workers, open_start, open_skip)
        else:
            bounds.append((open_start, size))
    jobs = [
        (str(chain.path), trust, strict, allow_markers, start, stop, index == 0,
         chain.follow_symlinks, _segments_of(chain))
        for index, (start, stop) in enumerate(bounds)
    ]  # fmt: skip
    reports: list[ChainReport] = []
    if parallel:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # fork: workers inherit the imported modules instead of re-importing them.
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            for (_start, done), report in zip(bounds, pool.map(_verify_job, jobs), strict=True):
                reports.append(report)
                if progress is not None:
                    progress(done, size)
    else:
        for index, ((_start, done), job) in enumerate(zip(bounds, jobs, strict=True)):
            away_segment = index < len(included) and included[index].number in away
            reports.append(_as_sealed(included[index]) if away_segment else _verify_job(job))
            if progress is not None:
                progress(done, size)
    entries = 0
    joined: list[ChainReport] = []
    for segment, group in zip(included, groups, strict=True):
        part = _joined(reports[: len(group)])
        del reports[: len(group)]
        entries += part.entries
        problem = segment_problem(segment, part, entries, trust)
        if problem is not None:
            part = part._replace(ok=False, line=max(part.lines, 1), reason=problem)
        joined.append(part)
    return stitch(joined + reports)


def _fresh_view(chain: ChainLines) -> "ChainView":
    """The chain's segments as their manifests now are (a listing may be remembered)."""
    forget_listings()
    return chain.view()


def _joined(parts: list[ChainReport]) -> ChainReport:
    """One segment's report from the reports of its ranges (its first link kept)."""
    if len(parts) == 1:
        return parts[0]
    whole = stitch(parts)
    return whole._replace(
        first_prev_hash=parts[0].first_prev_hash, first_entry_line=parts[0].first_entry_line
    )


def segment_ranges(chain: ChainLines, segment: Segment, share: int) -> list[tuple[int, int]]:
    """A sealed segment cut on line boundaries into ranges of about ``share`` bytes.

    Cuts fall just after the first line end at or after a frame's start, so
    each range's reader decompresses from its own frame on.

    Raises:
        ChainIOError: the segment cannot be read.
    """
    cuts = [segment.start]
    for offset, _compressed in segment.frames[1:]:
        position = segment.start + offset
        if position - cuts[-1] < share:
            continue
        piece = next(iter(chain.iter_lines(position, segment.end)), b"")
        cut = position + len(piece)
        if cut < segment.end and piece.endswith(b"\n"):
            cuts.append(cut)
    cuts.append(segment.end)
    return [(cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]


def _any_away(chain: ChainLines, sealed: tuple[Segment, ...]) -> bool:
    return chain.segments is not None and any(chain.segments.is_away(s) for s in sealed)


def _as_sealed(segment: Segment) -> ChainReport:
    """An archived segment's report, as its checkpoint states it (held to it after)."""
    checkpoint = segment.checkpoint
    return ChainReport(
        True, segment.entries, segment.lines, None, None, None, checkpoint.chain_id,
        checkpoint.head_hash, segment.last_ts,
    )  # fmt: skip


def segment_problem(
    segment: Segment, report: ChainReport, entries: int, trust: "TrustStore"
) -> str | None:
    """Why a verified segment does not match its signed checkpoint, or ``None``.

    The checkpoint must be signed by a key that counts, and name the
    segment's own head and the chain's entry count at its end: a sealed
    segment swapped for another, cut or extended fails here.
    """
    if not report.ok:
        return None
    checkpoint = segment.checkpoint
    where = f"segment {segment.number:06d}"
    problem = checkpoint_signature_problem(checkpoint, trust)
    if problem is not None:
        return f"{where}: {problem}"
    if report.head_hash != checkpoint.head_hash or entries != checkpoint.entries:
        return (
            f"{where} does not match its signed checkpoint "
            f"({checkpoint.entries} entries, head {checkpoint.head_hash[:12]})"
        )
    return None


def verify_range(
    chain: ChainLines,
    trust: "TrustStore",
    strict: bool,
    allow_markers: bool,
    start: int,
    end: int | None,
    *,
    from_genesis: bool,
) -> ChainReport:
    """Verify the lines in a byte range (from ``GENESIS`` for the first range).

    Raises:
        ChainIOError: the file cannot be read.
    """
    verifier = ChainVerifier(
        trust,
        strict=strict,
        allow_markers=allow_markers,
        expected_prev=GENESIS if from_genesis else None,
    )
    for raw in chain.iter_lines(start, end):
        if not verifier.feed(raw):
            break
    return verifier.report()


def byte_ranges(
    chain: ChainLines, size: int, workers: int, base: int = 0, skip: int = 0
) -> list[tuple[int, int]]:
    """Byte ranges of the open segment on line boundaries, each a share of what is left.

    Positions count the whole chain: the open segment starts at ``base``, and
    its file's first ``skip`` bytes are the newest sealed segment's (``chainview``).
    Workers take ranges in order as they free up; ranges that shrink toward
    the end keep the last worker from running on alone for long.

    Raises:
        ChainIOError: the file cannot be opened.
    """
    shift = base - skip
    cuts = [base]
    with os.fdopen(chain.open_read(), "rb") as handle:
        while True:
            left = size - cuts[-1]
            step = max(_MIN_RANGE_BYTES, left // (_RANGE_SHARE * workers))
            handle.seek(cuts[-1] - shift + step)
            handle.readline()
            position = handle.tell() + shift
            if position >= size:
                break
            cuts.append(position)
    cuts.append(size)
    return [(cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]


def _segments_of(chain: ChainLines) -> tuple[str, str | None] | None:
    """The segment folder and archive folder, as a worker process rebuilds them."""
    if chain.segments is None:
        return None
    archive = chain.segments.archive
    return str(chain.segments.directory), None if archive is None else str(archive)


def _verify_job(
    job: tuple[str, "TrustStore", bool, bool, int, int, bool, bool, tuple[str, str | None] | None],
) -> ChainReport:
    path, trust, strict, allow_markers, start, end, from_genesis, follow, folders = job
    segments = None
    if folders is not None:
        directory, archive = folders
        segments = SegmentDir(Path(directory), None if archive is None else Path(archive))
    lines = ChainLines(Path(path), follow_symlinks=follow, segments=segments)
    return verify_range(lines, trust, strict, allow_markers, start, end, from_genesis=from_genesis)
