"""Verifying a fleet's chain without ever making a writer wait (SPEC §21).

Every read here runs in one ``REPEATABLE READ, READ ONLY`` snapshot and takes
no advisory lock: a writer's append neither waits for it nor is seen half
done (a row becomes visible only with its commit, whole). So a verification
of any length, ``--full`` included, runs beside the fleet's verdicts.

``verify_rows`` reads every row. With ``workers`` above one it cuts the rows
into ranges of ``seq`` and verifies them side by side in forked processes,
each on a connection of its own that imports the same snapshot
(``pg_export_snapshot``), so all see exactly the rows the coordinator sees;
``ledger.core.chain.stitch`` joins their reports and checks the links across
every cut. Then each sealed segment is held to its seal: its last row must be
the entry its signed checkpoint names, and a seal whose rows are gone (a cut at
a boundary) is reported at the first missing line.

Without ``--full``, ``verify-chain`` resumes at the home's verified mark as on
one host: the prefix's bytes are hashed again (byte-exact, whatever a
trigger allowed), its signatures are not checked again.
"""

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ledger.core.chain import ChainReport, ChainVerifier, stitch
from ledger.core.checkpoint import checkpoint_signature_problem
from ledger.core.envelope import GENESIS, EnvelopeFormatError, parse_line
from ledger.edges.postgres import segments as seg

if TYPE_CHECKING:
    from ledger.core.trust import TrustStore
    from ledger.edges.postgres.db import PgDatabase

# Below this many rows a pool costs more than it saves.
_PARALLEL_MIN_ROWS = 20_000
# Ranges per worker, so that the workers finish together.
_RANGE_SHARE = 4
_ROWS_SQL = "SELECT line FROM chain WHERE seq > %s AND seq <= %s AND end_pos <= %s ORDER BY seq"


def committed_end(db: "PgDatabase") -> int:
    """Where the committed chain ends now, read without the lock (rows commit whole)."""
    return int(db.execute("SELECT coalesce(max(end_pos), 0) FROM chain")[0][0])


def verify_rows(
    db: "PgDatabase",
    trust: "TrustStore",
    *,
    strict: bool = False,
    allow_markers: bool = False,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    end: int | None = None,
) -> ChainReport:
    """Verify every row up to position ``end`` (the chain's end when ``None``), then the seals.

    Call it inside a read-only transaction (``PgDatabase.transaction(read_only=True)``)
    or a writer's own.
    """
    bounds = db.execute("SELECT coalesce(max(seq), 0), coalesce(max(end_pos), 0) FROM chain")
    last_seq, size = int(bounds[0][0]), int(bounds[0][1])
    limit = size if end is None else min(end, size)
    workers = workers or os.cpu_count() or 1
    flags = (trust, strict, allow_markers)
    if workers > 1 and last_seq >= _PARALLEL_MIN_ROWS:
        reports = _in_parallel(db, flags, _cuts(last_seq, workers), limit, workers, progress)
    else:  # in this process, range after range (progress after each)
        reports = []
        for after, up_to in _cuts(last_seq, 1):
            reports.append(_verify_range(db, flags, after, up_to, limit))
            if progress is not None:
                progress(min(limit, _end_of(db, up_to)), limit)
    if progress is not None:
        progress(limit, limit)
    report = stitch(reports)
    if not report.ok:
        return report
    return _held_to_seals(db, trust, report, last_seq, limit)


def _hash(raw: bytes) -> str | None:
    try:
        return parse_line(raw.rstrip(b"\n")).entry_hash
    except EnvelopeFormatError:
        return None


def _end_of(db: "PgDatabase", seq: int) -> int:
    found = db.execute(
        "SELECT end_pos FROM chain WHERE seq <= %s ORDER BY seq DESC LIMIT 1", (seq,)
    )
    return int(found[0][0]) if found else 0


def _cuts(last_seq: int, workers: int) -> list[tuple[int, int]]:
    """``seq`` ranges ``(after, up_to)`` covering 1..last_seq, about equal."""
    count = max(1, workers * _RANGE_SHARE)
    step = max(1, -(-last_seq // count))
    return [(lo, min(lo + step, last_seq)) for lo in range(0, last_seq, step)]


def _verify_range(
    db: "PgDatabase", flags: tuple["TrustStore", bool, bool], after: int, up_to: int, limit: int
) -> ChainReport:
    trust, strict, allow_markers = flags
    verifier = ChainVerifier(
        trust, strict=strict, allow_markers=allow_markers,
        expected_prev=GENESIS if after == 0 else None,
    )  # fmt: skip
    for (raw,) in db.stream(_ROWS_SQL, (after, up_to, limit)):
        if not verifier.feed(bytes(raw)):
            break
    return verifier.report()


def _in_parallel(
    db: "PgDatabase",
    flags: tuple["TrustStore", bool, bool],
    cuts: list[tuple[int, int]],
    limit: int,
    workers: int,
    progress: Callable[[int, int], None] | None,
) -> list[ChainReport]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # This transaction waits idle while the workers read: the session's guard
    # against clients idle in a transaction must not end it (and the snapshot
    # the workers import) before they are done.
    db.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
    snapshot = str(db.execute("SELECT pg_export_snapshot()")[0][0])
    jobs = [(db.url, db.listen_options(), snapshot, flags, after, up_to, limit)
            for after, up_to in cuts]  # fmt: skip
    reports: list[ChainReport] = []
    # fork: workers inherit the imported modules; each opens its own connection.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context) as pool:
        for index, report in enumerate(pool.map(_verify_job, jobs)):
            reports.append(report)
            if progress is not None:
                progress(limit * (index + 1) // len(jobs), limit)
    return reports


def _verify_job(job: tuple[Any, ...]) -> ChainReport:
    """One range in a worker, on the coordinator's snapshot."""
    import psycopg

    url, options, snapshot, flags, after, up_to, limit = job
    trust, strict, allow_markers = flags
    verifier = ChainVerifier(
        trust, strict=strict, allow_markers=allow_markers,
        expected_prev=GENESIS if after == 0 else None,
    )  # fmt: skip
    with psycopg.connect(url, **{**options, "autocommit": False}) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute("SET TRANSACTION SNAPSHOT %s" % _literal(snapshot))  # noqa: UP031
        with conn.cursor(name="ledger_verify_range") as cursor:
            cursor.itersize = 2000
            cursor.execute(_ROWS_SQL, (after, up_to, limit))
            for (raw,) in cursor:
                if not verifier.feed(bytes(raw)):
                    break
        conn.rollback()
    return verifier.report()


def _literal(snapshot: str) -> str:
    """The snapshot id as a literal (``SET TRANSACTION SNAPSHOT`` takes no parameter)."""
    if not snapshot or not all(ch.isalnum() or ch == "-" for ch in snapshot):
        raise ValueError(f"not a snapshot id: {snapshot!r}")
    return f"'{snapshot}'"


def _held_to_seals(
    db: "PgDatabase", trust: "TrustStore", report: ChainReport, last_seq: int, limit: int
) -> ChainReport:
    """Each seal must name the row it ends at; a seal past the last row means rows were cut."""
    sealed = seg.listing(db)
    if not sealed:
        return report
    wanted = [s.last_seq for s in sealed if s.end_pos <= limit and s.last_seq <= last_seq]
    rows = db.execute("SELECT seq, line FROM chain WHERE seq = ANY(%s)", (wanted,))
    hashes = {int(seq): _hash(bytes(line)) for seq, line in rows}
    for s in sealed:
        if s.last_seq > report.entries and s.end_pos > limit and s.last_seq <= last_seq:
            continue  # sealed after the bound this verification reads up to
        checkpoint, problem = seg.seal_problem(s, db.display)
        if checkpoint is not None and problem is None:
            problem = checkpoint_signature_problem(checkpoint, trust)
        other = checkpoint is not None and checkpoint.chain_id != report.genesis_hash
        if problem is None and other:
            problem = f"segment {s.number}'s seal is of another chain"
        if problem is None and s.last_seq > report.entries:
            line = report.entries + 1
            return report._replace(ok=False, line=line, reason=(
                f"entry missing: segment {s.number}'s signed seal vouches for {s.last_seq} "
                f"entries, the chain has {report.entries}"
            ))  # fmt: skip
        if problem is None and hashes.get(s.last_seq) != s.head_hash:
            problem = f"segment {s.number}'s last entry is not the one its signed seal names"
        if problem is not None:
            return report._replace(ok=False, line=s.last_seq, reason=problem)
    return report
