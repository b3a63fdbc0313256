"""``ledger snapshot``: a signed, compressed copy of the verified chain (SPEC §5).

Without the chain lock, on the chain up to the head read at the start (it is
append-only, so verdicts go on meanwhile): verify it as ``verify-chain``
verifies the home's (trust store and newest checkpoint; only the entries after
the newest checkpoint's verified mark when it has one), sign a checkpoint of
that head, and write the snapshot's three files (format in
``ledger.core.snapshot``), the chain copied line by line into the compressor:
memory does not grow with the chain. Then, a moment under the lock: check that the chain
still begins with what was snapshotted, write the checkpoint to
``checkpoints/``, prune snapshots older than ``snapshot.keep_days``, and append
a ``ledger.snapshot`` envelope naming the new one. A chain that does not verify
is refused and nothing is written.
"""

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ledger.core.canonical import sha256_hex
from ledger.core.checkpoint import Checkpoint, make_checkpoint
from ledger.core.config import Config
from ledger.core.seal import seal_time
from ledger.core.snapshot import (
    Manifest,
    SnapshotFileError,
    SnapshotRefusedError,
    document_bytes,
    make_manifest_of,
    manifest_from_bytes,
    snapshot_stem,
    snapshots_to_prune,
)
from ledger.core.snapshot_check import VerifiedSnapshot, verify_sealed_files, verify_snapshot
from ledger.core.timefmt import format_ts
from ledger.core.trust import TrustStore
from ledger.services.chain.streaming import mark_holds
from ledger.services.chain.verify import (
    CheckpointDeps,
    head_bound,
    keep_mark,
    resume_point,
    verify_streamed,
)
from ledger.services.chain.writer import Writer
from ledger.services.ports import StateStore

SNAPSHOT_EVENT = "ledger.snapshot"


class SnapshotStore(Protocol):
    """The files of a home that snapshots and recovery read and write."""

    def relative(self, path: Path) -> str:
        """``path`` relative to the home when inside it."""
        ...

    def read(self, path: Path, what: str) -> bytes:
        """A whole file (``InputDataError`` when unreadable)."""
        ...

    def compress(self, data: bytes) -> bytes:
        """Compress a chain."""
        ...

    def decompress(self, data: bytes, source: str) -> bytes:
        """Decompress a chain (``InputDataError`` when corrupt)."""
        ...

    def chain_name(self) -> str:
        """The chain file's name, for messages."""
        ...

    def read_chain(self) -> bytes | None:
        """The chain's bytes, or ``None`` when the file is missing."""
        ...

    def write_chain_copy(self, stem: str, lines: Iterable[bytes]) -> tuple[Path, str, str]:
        """Compress ``lines`` into a snapshot's chain file as they come (constant memory).

        Returns:
            The file, the SHA-256 of its compressed bytes and of the raw lines.
        """
        ...

    def copy_sealed(self, up_to: int) -> tuple[tuple[tuple[str, str], ...], int, tuple[Path, ...]]:
        """Copy the sealed segments ending by ``up_to``, once each; names, where the rest starts."""
        ...

    def read_segment_copies(self, manifest: Path, names: Iterable[str]) -> tuple[bytes, ...]:
        """The compressed segment copies a snapshot names."""
        ...

    def decompress_segment(self, data: bytes, source: str) -> bytes:
        """A segment copy's bytes."""
        ...

    def remove_unnamed_copies(self, named: Iterable[str]) -> None:
        """Remove segment copies no snapshot names (never the only copy)."""
        ...

    def write_snapshot(
        self, stem: str, chain_gz: bytes | None, checkpoint: bytes, manifest: bytes
    ) -> tuple[Path, Path, Path]:
        """Write a snapshot's files atomically, the manifest last.

        ``chain_gz`` ``None``: the chain file is already written (``write_chain_copy``).

        Returns:
            The files written: the compressed chain, the checkpoint, the manifest.
        """
        ...

    def snapshot_manifests(self) -> list[Path]:
        """Every snapshot manifest of the home."""
        ...

    def remove_snapshot(self, manifest: Path, siblings: list[str]) -> None:
        """Delete a snapshot's manifest and its sibling files."""
        ...

    def checkpoint_files(self) -> list[Path]:
        """Every checkpoint file of the home."""
        ...

    def damaged_evidence_path(self, stamp: str) -> Path:
        """Where ``keep_damaged`` would store the damaged chain now."""
        ...

    def keep_damaged(self, data: bytes, stamp: str) -> Path:
        """Store the damaged chain's bytes as new evidence; returns where."""
        ...

    def evidence_path(self, name: str) -> Path:
        """The first free evidence path for ``name``."""
        ...

    def retire(self, path: Path) -> Path:
        """Move a file into the evidence folder; returns where."""
        ...

    def replace_chain(self, data: bytes) -> None:
        """Replace the chain atomically."""
        ...

    def clear_state(self) -> list[Path]:
        """Delete the derived state; returns what was removed."""
        ...


class SnapshotDeps(CheckpointDeps, Protocol):
    """What snapshots and recovery need beyond appending and checkpointing."""

    @property
    def config(self) -> Config:
        """The home's configuration (``snapshot.keep_days``)."""
        ...

    def snapshot_files(self) -> SnapshotStore:
        """The home's snapshot, evidence and state files."""
        ...

    @property
    def states(self) -> StateStore:
        """The derived state (where a full verification's finding is kept)."""
        ...

    def newest_checkpoint(self) -> Checkpoint | None:
        """The home's newest checkpoint."""
        ...


@dataclass(frozen=True, slots=True)
class SnapshotResult:
    """A written snapshot.

    ``path`` is its manifest; ``files`` every file the snapshot wrote, in the
    order written: the checkpoint copy in ``checkpoints/``, the sealed segments
    copied now (``snapshots/segments/``), then the compressed chain, the
    checkpoint and the manifest in the snapshot folder.
    """

    path: str
    relative_path: str
    entries: int
    head_hash: str
    entry_hash: str
    pruned: tuple[str, ...]
    files: tuple[str, ...]


def take_snapshot(deps: SnapshotDeps) -> SnapshotResult:
    """Snapshot the verified chain, prune old snapshots, record ``ledger.snapshot``.

    Returns:
        The manifest's path, every file written, and the entry count and head
        hash of the chain snapshotted (before the ``ledger.snapshot`` entry).

    Raises:
        SnapshotRefusedError: the chain is empty or does not verify (nothing written).
        KeyFileError, InputDataError: no usable writer key or trust store.
        CheckpointError: the home's newest checkpoint is malformed.
        LockTimeoutError: the chain lock stayed busy.
        ChainIOError: a file could not be written.
    """
    trust = deps.keys.load_trust()
    signer = deps.keys.active_signer(trust)
    files = deps.snapshot_files()
    writer = Writer(deps)
    # The long part (verify, tree root, compress, write) runs on the prefix up to
    # the head read now, without the lock: the chain is append-only, so that
    # prefix stays as it is while verdicts go on appending after it.
    end = head_bound(deps.chain)
    if end == 0 or not deps.chain.exists():
        raise SnapshotRefusedError("the chain is empty: nothing to snapshot")
    # Verified in one pass in constant memory, from the newest checkpoint's
    # verified mark when it has one (a verified prefix stays verified).
    newest = deps.newest_checkpoint()
    resume = resume_point(deps.chain, trust, newest, deps.verified_mark())
    check = verify_streamed(deps.chain, trust, newest, resume, end=end)
    mark = check.mark
    if check.ok and check.entries == 0:
        raise SnapshotRefusedError("the chain is empty: nothing to snapshot")
    if not check.ok or mark is None or check.root_hash is None:
        where = "" if check.line is None else f"BROKEN line {check.line}: "
        raise SnapshotRefusedError(
            f"refusing to snapshot a broken chain: {where}{check.reason}; run `ledger recover`"
        )
    now = deps.clock.now()
    # Never dated before the head it vouches for (a clock behind, LEDGER_NOW
    # replaying the past): the signing key must be valid at that time.
    moment = seal_time(now, mark.head_ts)
    checkpoint = make_checkpoint(
        signer, mark.chain_id, mark.entries, mark.head_hash, format_ts(moment), check.root_hash
    )
    checkpoint_file = document_bytes(checkpoint.to_document())
    stem = snapshot_stem(checkpoint.ts_utc, checkpoint.entries)
    # Sealed segments are copied once (later snapshots name the same copy);
    # the rest is copied line by line into the compressor: memory does not
    # grow with the chain.
    copies, base, copied = files.copy_sealed(mark.position)
    _chain_path, chain_sha256, raw_sha256 = files.write_chain_copy(
        stem, deps.chain.iter_lines(base, mark.position)
    )
    manifest = make_manifest_of(
        signer,
        checkpoint,
        stem=stem,
        chain_sha256=chain_sha256,
        raw_sha256=raw_sha256,
        checkpoint_file=checkpoint_file,
        segments=copies,
    )
    manifest_file = document_bytes(manifest.to_document())
    written = files.write_snapshot(stem, None, checkpoint_file, manifest_file)
    path = written[-1]
    with deps.chain.transaction() as tx:
        # A moment under the lock: the prefix must still be the chain's (a
        # recover meanwhile replaces it), then the checkpoint and the entry.
        if not mark_holds(deps.chain, mark):
            files.remove_snapshot(path, [manifest.chain_file, manifest.checkpoint_file])
            raise SnapshotRefusedError(
                "the chain was replaced while it was snapshotted; nothing was kept, run it again"
            )
        checkpoint_copy = deps.write_checkpoint(checkpoint)
        pruned = prune_snapshots(files, now, deps.config.snapshot_keep_days, keep=path)
        relative = files.relative(path)
        sealed = writer.append(
            tx,
            SNAPSHOT_EVENT,
            {
                "path": relative,
                "sha256": sha256_hex(manifest_file),
                "entries": mark.entries,
                "head_hash": mark.head_hash,
                "chain_id": mark.chain_id,
                "chain_sha256": manifest.chain_sha256,
                "pruned": list(pruned),
            },
            signer=signer,
        )
    keep_mark(deps, mark)
    return SnapshotResult(
        str(path),
        relative,
        mark.entries,
        mark.head_hash,
        sealed.entry_hash,
        pruned,
        tuple(str(name) for name in (checkpoint_copy, *copied, *written)),
    )


def read_manifests(files: SnapshotStore) -> tuple[list[tuple[Path, Manifest]], list[Path]]:
    """The home's snapshot manifests that parse, and the paths of those that do not.

    Raises:
        InputDataError: a manifest file cannot be read at all.
    """
    parsed: list[tuple[Path, Manifest]] = []
    broken: list[Path] = []
    for path in files.snapshot_manifests():
        try:
            parsed.append((path, manifest_from_bytes(files.read(path, "snapshot"), str(path))))
        except SnapshotFileError:
            broken.append(path)
    return parsed, broken


def prune_snapshots(
    files: SnapshotStore, now: dt.datetime, keep_days: int, *, keep: Path
) -> tuple[str, ...]:
    """Delete snapshots whose checkpoint is older than ``keep_days``; never the newest.

    Manifests that do not parse are left alone (an operator should look at them).

    Returns:
        The removed manifests, relative to the home.

    Raises:
        ChainIOError: a file could not be removed.
    """
    manifests, _broken = read_manifests(files)
    by_name = {str(path): (path, manifest) for path, manifest in manifests}
    doomed = snapshots_to_prune(
        [(name, manifest.ts_utc, manifest.entries) for name, (_p, manifest) in by_name.items()],
        now,
        keep_days,
        str(keep),
    )
    removed = []
    for name in doomed:
        path, manifest = by_name[name]
        files.remove_snapshot(path, [manifest.chain_file, manifest.checkpoint_file])
        removed.append(files.relative(path))
    if removed:
        left, _broken = read_manifests(files)
        files.remove_unnamed_copies(name for _p, kept in left for name, _sha in kept.segments)
    return tuple(removed)


def load_snapshot(
    files: SnapshotStore, path: Path, manifest: Manifest, trust: TrustStore
) -> VerifiedSnapshot:
    """Read a snapshot's files and verify every binding.

    Raises:
        InputDataError: a file is missing, unreadable or not gzip (exit 65).
        SnapshotFileError, CheckpointError: the checkpoint file is malformed (65).
        SnapshotInvalidError: the snapshot does not verify (exit 1).
    """
    chain_gz = files.read(path.parent / manifest.chain_file, "snapshot chain")
    checkpoint_file = files.read(path.parent / manifest.checkpoint_file, "snapshot checkpoint")
    source = files.relative(path)
    copies = files.read_segment_copies(path, [name for name, _sha in manifest.segments])
    verify_sealed_files(
        manifest, chain_gz=chain_gz, checkpoint_file=checkpoint_file, trust=trust, source=source,
        segment_files=copies,
    )  # fmt: skip
    raw_chain = files.decompress(chain_gz, str(path.parent / manifest.chain_file))
    sealed = b"".join(
        files.decompress_segment(data, name)
        for data, (name, _sha) in zip(copies, manifest.segments, strict=True)
    )
    return verify_snapshot(
        manifest,
        chain_gz=chain_gz,
        raw_chain=raw_chain,
        checkpoint_file=checkpoint_file,
        trust=trust,
        source=source,
        segment_files=copies,
        sealed_raw=sealed,
    )
