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
from ledger.core.envelope import GENESIS
from ledger.edges.files.chainlines import ChainLines

if TYPE_CHECKING:
    from ledger.core.trust import TrustStore

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
    """Verify the file up to byte ``end``, in parallel byte ranges when it is large.

    Without the lock a writer may be appending: bounded by a head read before,
    a line still being written past it is never read as a torn tail.

    Args:
        chain: the chain file to verify.
        trust: keys that may sign.
        strict: every entry must be signed.
        allow_markers: skip lines beginning with ``[`` instead of failing them.
        workers: processes to use; the number of CPUs when ``None``.
        progress: called with ``(bytes verified, file size)`` as each range ends.
        end: where to stop (a line boundary); the file's size when ``None``.

    Raises:
        ChainIOError: the file cannot be read.
    """
    fd = chain.open_read()
    try:
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if end is not None:
        size = min(size, end)
    workers = workers or os.cpu_count() or 1
    if size < _PARALLEL_MIN_BYTES or workers == 1:
        return verify_range(chain, trust, strict, allow_markers, 0, end, from_genesis=True)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    bounds = byte_ranges(chain, size, workers)
    jobs = [
        (
            str(chain.path),
            trust,
            strict,
            allow_markers,
            start,
            end,
            index == 0,
            chain.follow_symlinks,
        )
        for index, (start, end) in enumerate(bounds)
    ]
    reports: list[ChainReport] = []
    # fork: workers inherit the imported modules instead of re-importing them.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        for (_start, done), report in zip(bounds, pool.map(_verify_job, jobs), strict=True):
            reports.append(report)
            if progress is not None:
                progress(done, size)
    return stitch(reports)


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


def byte_ranges(chain: ChainLines, size: int, workers: int) -> list[tuple[int, int]]:
    """Byte ranges on line boundaries, each a share of what the ones before leave.

    Workers take ranges in order as they free up; ranges that shrink toward
    the end keep the last worker from running on alone for long.

    Raises:
        ChainIOError: the file cannot be opened.
    """
    cuts = [0]
    with os.fdopen(chain.open_read(), "rb") as handle:
        while True:
            left = size - cuts[-1]
            handle.seek(cuts[-1] + max(_MIN_RANGE_BYTES, left // (_RANGE_SHARE * workers)))
            handle.readline()
            position = handle.tell()
            if position >= size:
                break
            cuts.append(position)
    cuts.append(size)
    return [(cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]


def _verify_job(
    job: tuple[str, "TrustStore", bool, bool, int, int, bool, bool],
) -> ChainReport:
    path, trust, strict, allow_markers, start, end, from_genesis, follow = job
    return verify_range(
        ChainLines(Path(path), follow_symlinks=follow),
        trust,
        strict,
        allow_markers,
        start,
        end,
        from_genesis=from_genesis,
    )
