"""Whether a snapshot counts: its manifest's signature, its files' hashes, its chain.

The checks follow the order the format (``ledger.core.snapshot``) makes cheap:
the manifest's signature and the sealed files' hashes first, so that bytes nobody
signed are never decompressed, then the checkpoint and the chain it vouches for.
A snapshot that passes becomes a ``VerifiedSnapshot``, the only form recovery
accepts as a base.
"""

from dataclasses import dataclass

from ledger.core.canonical import sha256_hex
from ledger.core.chain_check import check_chain, split_lines
from ledger.core.checkpoint import Checkpoint, statement_signature_problem
from ledger.core.snapshot import Manifest, SnapshotInvalidError, checkpoint_from_bytes
from ledger.core.trust import TrustStore


def manifest_signature_problem(manifest: Manifest, trust: TrustStore) -> str | None:
    """Why the manifest's signature does not count, or ``None`` when it does.

    The key must be trusted, valid at the manifest's time and not revoked then:
    the rules of a chain entry (SPEC §2, Keys and trust), with a signature required.
    """
    return statement_signature_problem(
        "manifest",
        manifest.ts_utc,
        manifest.signed_part(),
        manifest.signature,
        manifest.signing_key_id,
        trust,
    )


@dataclass(frozen=True, slots=True)
class VerifiedSnapshot:
    """A snapshot that verified: its chain lines and what its checkpoint says."""

    manifest: Manifest
    checkpoint: Checkpoint
    lines: tuple[bytes, ...]


def _fail(source: str, reason: str) -> SnapshotInvalidError:
    return SnapshotInvalidError(f"snapshot {source} does not verify: {reason}")


def verify_sealed_files(
    manifest: Manifest,
    *,
    chain_gz: bytes,
    checkpoint_file: bytes,
    trust: TrustStore,
    source: str,
    segment_files: tuple[bytes, ...] = (),
) -> None:
    """Check the manifest's signature and the hashes of the files it seals.

    Cheap, and done before decompressing: bytes that nobody signed are never
    expanded.

    Raises:
        SnapshotInvalidError: the signature or a hash does not match.
    """
    problem = manifest_signature_problem(manifest, trust)
    if problem is not None:
        raise _fail(source, problem)
    if sha256_hex(chain_gz) != manifest.chain_sha256:
        raise _fail(source, f"{manifest.chain_file} does not hash as the manifest says")
    if sha256_hex(checkpoint_file) != manifest.checkpoint_sha256:
        raise _fail(source, f"{manifest.checkpoint_file} does not hash as the manifest says")
    if len(segment_files) != len(manifest.segments):
        raise _fail(source, "its segment copies are not the ones the manifest names")
    for (name, digest), data in zip(manifest.segments, segment_files, strict=True):
        if sha256_hex(data) != digest:
            raise _fail(source, f"{name} does not hash as the manifest says")


def verify_snapshot(
    manifest: Manifest,
    *,
    chain_gz: bytes,
    raw_chain: bytes,
    checkpoint_file: bytes,
    trust: TrustStore,
    source: str,
    segment_files: tuple[bytes, ...] = (),
    sealed_raw: bytes = b"",
) -> VerifiedSnapshot:
    """Check every binding of a snapshot (see ``ledger.core.snapshot``'s docstring).

    Args:
        manifest: the parsed manifest.
        chain_gz: the compressed chain file's bytes.
        raw_chain: those bytes decompressed.
        checkpoint_file: the checkpoint file's bytes.
        trust: the keys that may have signed the manifest, checkpoint and entries.
        source: the manifest's name, for messages.
        segment_files: the segment copies the manifest names, compressed.
        sealed_raw: those decompressed, one after another (the chain's start).

    Raises:
        SnapshotInvalidError: any binding fails; the message says which.
        SnapshotFileError: the checkpoint file is not JSON.
        CheckpointError: the checkpoint file is not a checkpoint.
    """
    verify_sealed_files(
        manifest, chain_gz=chain_gz, checkpoint_file=checkpoint_file, trust=trust, source=source,
        segment_files=segment_files,
    )  # fmt: skip
    if sha256_hex(raw_chain) != manifest.raw_sha256:
        raise _fail(source, f"{manifest.chain_file} decompresses to other bytes than signed")
    checkpoint = checkpoint_from_bytes(checkpoint_file, manifest.checkpoint_file)
    bound = (checkpoint.chain_id, checkpoint.entries, checkpoint.head_hash, checkpoint.ts_utc)
    if bound != (manifest.chain_id, manifest.entries, manifest.head_hash, manifest.ts_utc):
        raise _fail(source, "checkpoint and manifest disagree")
    lines = split_lines(sealed_raw + raw_chain)
    check = check_chain(lines, trust, checkpoint)
    if not check.ok:
        where = "" if check.line is None else f"line {check.line}: "
        raise _fail(source, f"{where}{check.reason}")
    if check.entries != checkpoint.entries:
        raise _fail(
            source, f"chain has {check.entries} entries, its checkpoint {checkpoint.entries}"
        )
    return VerifiedSnapshot(manifest, checkpoint, tuple(lines))


__all__ = [
    "VerifiedSnapshot",
    "manifest_signature_problem",
    "verify_sealed_files",
    "verify_snapshot",
]
