"""``ledger store migrate``: a file home copied into an empty PostgreSQL store (SPEC §21).

The chain, trust store, checkpoints and gateway keys go in one transaction.

Nothing is copied unless the file chain verifies; the rows are verified again
inside the same transaction, before the commit, and must end at the same head:
a copy that does not reproduce the chain never commits. A store that already
holds a chain is refused, unless it is this very chain (a migration whose
last steps were interrupted: the remaining steps then run again).
"""

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from ledger.core.chain import ChainReport, ChainVerifier
from ledger.core.checkpoint import Checkpoint
from ledger.core.envelope import GENESIS
from ledger.core.gateway_keys import GatewayKey
from ledger.core.trust import TrustStore
from ledger.edges.files.checkpointfiles import load_checkpoint
from ledger.edges.postgres.checkpoints import PgCheckpoints
from ledger.edges.postgres.fleetsecret import FleetSecret
from ledger.edges.postgres.gatewaykeys import PgGatewayKeys
from ledger.edges.postgres.segments import insert_sealed
from ledger.edges.postgres.store import PgChainStore
from ledger.errors import EXIT_DATA, ChainIOError, LedgerError

EVIDENCE_DIR = "migrated"


class StoreHoldsAnotherChainError(LedgerError):
    """The target store already holds a chain that is not this home's (exit 65)."""

    exit_code = EXIT_DATA


class Copied(NamedTuple):
    """What the migration moved."""

    entries: int
    head_hash: str | None
    checkpoints: int
    gateway_keys: int
    already: bool  # the store held this chain already (an interrupted migration)
    segments: int = 0


class Boundary(NamedTuple):
    """A file home's sealed segment, as the rows it becomes: its lines and its seal."""

    first_line: int
    lines: int
    end: int  # the position after its last line
    checkpoint: Checkpoint


def boundaries_of(chain: object) -> list[Boundary]:
    """The sealed segments of a home's file chain, in order (none for a chain without any)."""
    segments = getattr(chain, "segments", None)
    if segments is None:
        return []
    return [Boundary(s.first_line, s.lines, s.end, s.checkpoint) for s in segments.listing()]


def verify_lines(lines: Iterable[bytes], trust: TrustStore) -> ChainReport:
    """The report of verifying ``lines`` as a whole chain."""
    verifier = ChainVerifier(trust, expected_prev=GENESIS)
    for raw in lines:
        if not verifier.feed(raw):
            break
    return verifier.report()


def copy_home(
    lines: list[bytes],
    report: ChainReport,
    trust_document: bytes,
    checkpoint_paths: list[Path],
    gateway_keys: list[GatewayKey],
    chain: PgChainStore,
    secret: FleetSecret,
    trust: TrustStore,
    boundaries: list[Boundary] | None = None,
) -> Copied:
    """Copy everything in one transaction of the store, verified before it commits.

    The file's sealed segments stay segments: each becomes a range of rows
    sealed by the same signed checkpoint (``boundaries``), so a verification
    after the move holds each range to the seal it had in the file.

    Raises:
        StoreHoldsAnotherChainError: the store holds another chain, or another
            fleet's trust store.
        ChainIOError: the copy does not verify to the same head (nothing committed).
        StoreUnreachableError, LockTimeoutError: the store failed.
    """
    db = chain.db
    with chain.transaction() as tx:
        head = tx.head()
        if head is not None:
            if head.seq == report.entries and head.entry_hash == report.head_hash:
                return Copied(report.entries, report.head_hash, 0, 0, already=True)
            raise StoreHoldsAnotherChainError(
                f"store migrate: {db.display} already holds another chain ({head.seq} entries, "
                f"head {head.entry_hash[:16]}); migrate into an empty schema ([store] schema)"
            )
        if db.execute("SELECT count(*) FROM trust_store")[0][0]:
            raise StoreHoldsAnotherChainError(
                f"store migrate: {db.display} already has a fleet's trust store; "
                "migrate into an empty schema ([store] schema)"
            )
        secret.join()
        db.execute("INSERT INTO trust_store (id, document) VALUES (1, %s)", (trust_document,))
        for raw in lines:
            tx.append(raw)
        checkpoints = PgCheckpoints(db)
        for path in checkpoint_paths:
            checkpoints.write(load_checkpoint(path))
        if gateway_keys:
            PgGatewayKeys(db, secret).change(lambda _keys: list(gateway_keys))
        sealed = [
            (b.first_line, b.first_line + b.lines - 1, b.end, b.checkpoint.head_hash, b.checkpoint)
            for b in boundaries or []
        ]
        insert_sealed(db, sealed)
        copied = chain.verify(trust)
        if not copied.ok or (copied.entries, copied.head_hash) != (
            report.entries,
            report.head_hash,
        ):
            raise ChainIOError(
                f"store migrate: the copy in {db.display} does not verify to the file's head "
                f"({copied.reason or copied.head_hash}); nothing was committed"
            )
    return Copied(
        report.entries, report.head_hash, len(checkpoint_paths), len(gateway_keys),
        already=False, segments=len(sealed),
    )  # fmt: skip


def keep_as_evidence(chain_path: Path, home: Path) -> Path:
    """Move the file chain into ``migrated/`` of the home, read-only (evidence of the move).

    Raises:
        OSError: the move failed.
    """
    target_dir = home / EVIDENCE_DIR
    target_dir.mkdir(mode=0o755, exist_ok=True)
    target = target_dir / chain_path.name
    chain_path.replace(target)
    target.chmod(0o444)
    segments = chain_path.parent / "segments"
    if segments.is_dir():  # the sealed segments (already read-only) go with it
        segments.replace(target_dir / segments.name)
    return target
