"""Snapshots and recovery plans as pure values (SPEC §5, Snapshot and Recover).

**Snapshot format** ``ledger-snapshot/1``: three sibling files in the home's
``snapshots/`` folder sharing the stem
``snapshot-<YYYYMMDDTHHMMSSffffffZ>-<entries, 12 digits>``:

* ``<stem>.jsonl.gz``: the verified chain, byte for byte, gzip-compressed;
* ``<stem>.checkpoint.json``: the signed checkpoint of that chain (SPEC §2,
  Truncation), the same document that is written to ``checkpoints/``;
* ``<stem>.manifest.json``: the manifest, which binds the two together under the
  signature of the active writer key::

      {"format": "ledger-snapshot/1",
       "ts_utc": <the checkpoint's time>,
       "chain_id": ..., "entries": N, "head_hash": ...,   (equal to the checkpoint's)
       "chain_file": "<stem>.jsonl.gz",
       "chain_sha256": <SHA-256 of the compressed file>,
       "raw_sha256": <SHA-256 of the uncompressed chain>,
       "checkpoint_file": "<stem>.checkpoint.json",
       "checkpoint_sha256": <SHA-256 of the checkpoint file>,
       "signing_key_id": ...,
       "signature": <base64 Ed25519 over the RFC 8785 bytes of every other field>}

A snapshot counts only when all of this holds: the manifest's signature verifies
under the trust store with a key valid (and not revoked) at ``ts_utc``; both
files hash as the manifest says; the checkpoint's own signature verifies and its
identity, count and head equal the manifest's; and the decompressed chain
verifies from ``GENESIS`` with exactly that identity, count and head. The
manifest is written last, so a snapshot cut short by a crash has no manifest and
does not exist. The manifest is the file a ``ledger.snapshot`` envelope and
``ledger recover --snapshot F`` name.

**Recovery plan**: ``plan_recovery`` computes the longest valid prefix from the
lines of a damaged chain and, optionally, a verified snapshot: the snapshot's
entries, then every line of the damaged file from the one linking to the
snapshot's head onward for as long as the lines chain and verify. Without a
snapshot it is the damaged file's own longest verifying prefix.
"""

import datetime as dt
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from ledger.core.canonical import canonical_bytes, sha256_hex
from ledger.core.chain import ChainReport, ChainVerifier
from ledger.core.checkpoint import (
    Checkpoint,
    CheckpointError,
    checkpoint_from_document,
    checkpoint_signature_problem,
    compare_with_checkpoint,
)
from ledger.core.envelope import EnvelopeFormatError, ParsedEntry, parse_line
from ledger.core.signing import Signer
from ledger.core.timefmt import parse_ts
from ledger.core.trust import TrustStore
from ledger.errors import InputDataError, LedgerError

SNAPSHOT_FORMAT = "ledger-snapshot/1"
CHAIN_SUFFIX = ".jsonl.gz"
CHECKPOINT_SUFFIX = ".checkpoint.json"
MANIFEST_SUFFIX = ".manifest.json"
SNAPSHOT_PREFIX = "snapshot-"

# Sibling file names only: a manifest must never point outside its own folder.
_SIBLING_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_SECONDS_PER_DAY = 86_400


class SnapshotFileError(InputDataError):
    """A snapshot's files cannot be parsed (exit 65 when the user named the file)."""


class SnapshotInvalidError(LedgerError):
    """A snapshot reads but does not verify: signature, hashes, checkpoint or chain."""


class SnapshotRefusedError(LedgerError):
    """The home's chain does not verify, so no snapshot was written."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """The signed statement that ties a snapshot's chain copy to its checkpoint."""

    ts_utc: str
    chain_id: str
    entries: int
    head_hash: str
    chain_file: str
    chain_sha256: str
    raw_sha256: str
    checkpoint_file: str
    checkpoint_sha256: str
    signing_key_id: str
    signature: str

    def signed_part(self) -> dict[str, Any]:
        """The fields the signature covers (everything but the signature)."""
        return {
            "format": SNAPSHOT_FORMAT,
            "ts_utc": self.ts_utc,
            "chain_id": self.chain_id,
            "entries": self.entries,
            "head_hash": self.head_hash,
            "chain_file": self.chain_file,
            "chain_sha256": self.chain_sha256,
            "raw_sha256": self.raw_sha256,
            "checkpoint_file": self.checkpoint_file,
            "checkpoint_sha256": self.checkpoint_sha256,
            "signing_key_id": self.signing_key_id,
        }

    def to_document(self) -> dict[str, Any]:
        """The JSON form stored on disk."""
        return {**self.signed_part(), "signature": self.signature}


def snapshot_stem(ts_utc: str, entries: int) -> str:
    """The shared file-name stem of one snapshot; sorts by time, then count."""
    stamp = ts_utc.replace("-", "").replace(":", "").replace(".", "")
    return f"{SNAPSHOT_PREFIX}{stamp}-{entries:012d}"


def manifest_name_for(name: str) -> str:
    """The manifest's file name for any of a snapshot's three file names.

    ``ledger recover --snapshot F`` accepts the manifest, the compressed chain or
    the checkpoint of a snapshot; all three lead to the manifest.
    """
    for suffix in (CHAIN_SUFFIX, CHECKPOINT_SUFFIX):
        if name.endswith(suffix):
            return name[: -len(suffix)] + MANIFEST_SUFFIX
    return name


def document_bytes(document: dict[str, Any]) -> bytes:
    """How snapshot documents are stored: RFC 8785 bytes and a newline.

    Checkpoints are stored the same way in ``checkpoints/``, so the copy in a
    snapshot is byte-identical to the one there.
    """
    return canonical_bytes(document) + b"\n"


def make_manifest(
    signer: Signer,
    checkpoint: Checkpoint,
    *,
    stem: str,
    chain_gz: bytes,
    raw_chain: bytes,
    checkpoint_file: bytes,
) -> Manifest:
    """Sign the manifest of a snapshot whose files are ``chain_gz`` and ``checkpoint_file``."""
    unsigned = Manifest(
        ts_utc=checkpoint.ts_utc,
        chain_id=checkpoint.chain_id,
        entries=checkpoint.entries,
        head_hash=checkpoint.head_hash,
        chain_file=stem + CHAIN_SUFFIX,
        chain_sha256=sha256_hex(chain_gz),
        raw_sha256=sha256_hex(raw_chain),
        checkpoint_file=stem + CHECKPOINT_SUFFIX,
        checkpoint_sha256=sha256_hex(checkpoint_file),
        signing_key_id=signer.key_id,
        signature="",
    )
    signature = signer.sign_b64(canonical_bytes(unsigned.signed_part()))
    return replace(unsigned, signature=signature)


def _json_object(data: bytes, source: str, what: str) -> dict[str, Any]:
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise SnapshotFileError(f"{what} {source} is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise SnapshotFileError(f"{what} {source} is not a JSON object")
    return document


def manifest_from_bytes(data: bytes, source: str) -> Manifest:
    """Parse a manifest file (its signature is not checked here).

    Raises:
        SnapshotFileError: not JSON, not a ``ledger-snapshot/1`` manifest, a field
            missing or malformed, or a file name that leaves the snapshot's folder.
    """
    document = _json_object(data, source, "snapshot manifest")
    if document.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotFileError(f"{source}: not a {SNAPSHOT_FORMAT} manifest")
    names = [field.name for field in fields(Manifest)]
    missing = [name for name in names if name not in document]
    if missing:
        raise SnapshotFileError(f"{source}: manifest field {missing[0]!r} missing")
    if any(not isinstance(document[name], str) for name in names if name != "entries"):
        raise SnapshotFileError(f"{source}: a manifest field is not a string")
    manifest = Manifest(**{name: document[name] for name in names})
    problem = _manifest_problem(manifest)
    if problem is not None:
        raise SnapshotFileError(f"{source}: {problem}")
    return manifest


def _manifest_problem(manifest: Manifest) -> str | None:
    if isinstance(manifest.entries, bool) or not isinstance(manifest.entries, int):
        return "manifest entries is not an integer"
    if manifest.entries < 1:
        return "manifest entries must be positive"
    for name in (manifest.chain_file, manifest.checkpoint_file):
        if not _SIBLING_RE.fullmatch(name):
            return f"file name {name!r} is not a plain sibling name"
    hashes = (
        manifest.chain_id,
        manifest.head_hash,
        manifest.chain_sha256,
        manifest.raw_sha256,
        manifest.checkpoint_sha256,
    )
    if not all(_HASH_RE.fullmatch(value) for value in hashes):
        return "a hash is not lowercase SHA-256 hex"
    try:
        parse_ts(manifest.ts_utc)
    except ValueError as exc:
        return str(exc)
    return None


def checkpoint_from_bytes(data: bytes, source: str) -> Checkpoint:
    """Parse a checkpoint file's bytes (signature not yet checked).

    Raises:
        SnapshotFileError: not JSON.
        CheckpointError: not a checkpoint.
    """
    return checkpoint_from_document(_json_object(data, source, "checkpoint"), source)


def manifest_signature_problem(manifest: Manifest, trust: TrustStore) -> str | None:
    """Why the manifest's signature does not count, or ``None`` when it does.

    The key must be trusted, valid at the manifest's time and not revoked then:
    the rules of a chain entry (SPEC §2, Keys and trust), with a signature required.
    """
    as_entry = ParsedEntry(
        entry={"ts_utc": manifest.ts_utc},
        preimage=canonical_bytes(manifest.signed_part()),
        entry_hash="",
        signature=manifest.signature,
        signing_key_id=manifest.signing_key_id,
    )
    problem = trust.signature_problem(as_entry, strict=True)
    return None if problem is None else f"manifest: {problem}"


def split_lines(data: bytes) -> list[bytes]:
    """Raw lines, each with its ``\\n``; a last line without one (torn) is kept as is.

    Only ``\\n`` ends a line (SPEC §2), unlike ``bytes.splitlines``.
    """
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


@dataclass(frozen=True, slots=True)
class ChainCheck:
    """A chain verified the way ``verify-chain`` verifies the home's chain."""

    ok: bool
    entries: int
    line: int | None
    reason: str | None
    head_hash: str | None
    genesis_hash: str | None
    head_ts: str | None = None


def line_hash(raw: bytes) -> str | None:
    """The entry hash of a complete line, or ``None`` if it is torn or malformed."""
    if not raw.endswith(b"\n"):
        return None
    try:
        return parse_line(raw[:-1]).entry_hash
    except EnvelopeFormatError:
        return None


def _run(verifier: ChainVerifier, lines: Iterable[bytes], first_line: int = 1) -> ChainReport:
    """Feed ``lines`` (numbered from ``first_line``) until one fails; the report.

    A line whose ``ts_utc`` has the right shape but is no calendar time (month
    13) makes ``feed`` raise ``ValueError`` instead of failing the line; here it
    fails that line, so that a damaged chain can never crash a recovery.
    """
    for raw in lines:
        try:
            if not verifier.feed(raw):
                break
        except ValueError as exc:
            report = verifier.report()
            return ChainReport(
                ok=False,
                entries=report.entries,
                lines=report.lines,
                line=first_line + report.lines - 1,
                reason=f"malformed entry: {exc}",
                first_prev_hash=report.first_prev_hash,
                genesis_hash=report.genesis_hash,
                head_hash=report.head_hash,
                head_ts=report.head_ts,
                first_entry_line=report.first_entry_line,
            )
    return verifier.report()


def check_chain(
    lines: Sequence[bytes], trust: TrustStore, checkpoint: Checkpoint | None = None
) -> ChainCheck:
    """Verify every line (JSON, link, signature), then hold the chain to ``checkpoint``.

    Markers are not allowed: this is the home's own chain, which never holds them.
    """
    report = _run(ChainVerifier(trust), lines)
    if not report.ok:
        return ChainCheck(False, report.entries, report.line, report.reason, None, None)
    if checkpoint is not None:
        problem = checkpoint_signature_problem(checkpoint, trust)
        if problem is not None:
            return ChainCheck(False, report.entries, None, problem, None, None)
        hash_at_count = None
        if report.entries >= checkpoint.entries:
            hash_at_count = line_hash(lines[checkpoint.entries - 1])
        departure = compare_with_checkpoint(report, checkpoint, hash_at_count)
        if departure is not None:
            line, reason = departure
            return ChainCheck(False, report.entries, line, reason, None, None)
    return ChainCheck(
        True, report.entries, None, None, report.head_hash, report.genesis_hash, report.head_ts
    )


def checkpoint_fits(checkpoint: Checkpoint, lines: Sequence[bytes], trust: TrustStore) -> bool:
    """Whether a verified chain of ``lines`` satisfies ``checkpoint``.

    It does when the checkpoint's signature counts and the chain holds the
    checkpoint's first entry and its entry number ``entries`` (SPEC §2,
    Truncation); a checkpoint that does not fit would fail ``verify-chain``.
    """
    if checkpoint_signature_problem(checkpoint, trust) is not None:
        return False
    if not lines or checkpoint.entries > len(lines):
        return False
    return (
        line_hash(lines[0]) == checkpoint.chain_id
        and line_hash(lines[checkpoint.entries - 1]) == checkpoint.head_hash
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
) -> None:
    """Check the manifest's signature and the hashes of the two files it seals.

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


def verify_snapshot(
    manifest: Manifest,
    *,
    chain_gz: bytes,
    raw_chain: bytes,
    checkpoint_file: bytes,
    trust: TrustStore,
    source: str,
) -> VerifiedSnapshot:
    """Check every binding of a snapshot (see the module docstring).

    Args:
        manifest: the parsed manifest.
        chain_gz: the compressed chain file's bytes.
        raw_chain: those bytes decompressed.
        checkpoint_file: the checkpoint file's bytes.
        trust: the keys that may have signed the manifest, checkpoint and entries.
        source: the manifest's name, for messages.

    Raises:
        SnapshotInvalidError: any binding fails; the message says which.
        SnapshotFileError: the checkpoint file is not JSON.
        CheckpointError: the checkpoint file is not a checkpoint.
    """
    verify_sealed_files(
        manifest, chain_gz=chain_gz, checkpoint_file=checkpoint_file, trust=trust, source=source
    )
    if sha256_hex(raw_chain) != manifest.raw_sha256:
        raise _fail(source, f"{manifest.chain_file} decompresses to other bytes than signed")
    checkpoint = checkpoint_from_bytes(checkpoint_file, manifest.checkpoint_file)
    bound = (checkpoint.chain_id, checkpoint.entries, checkpoint.head_hash, checkpoint.ts_utc)
    if bound != (manifest.chain_id, manifest.entries, manifest.head_hash, manifest.ts_utc):
        raise _fail(source, "checkpoint and manifest disagree")
    lines = split_lines(raw_chain)
    check = check_chain(lines, trust, checkpoint)
    if not check.ok:
        where = "" if check.line is None else f"line {check.line}: "
        raise _fail(source, f"{where}{check.reason}")
    if check.entries != checkpoint.entries:
        raise _fail(
            source, f"chain has {check.entries} entries, its checkpoint {checkpoint.entries}"
        )
    return VerifiedSnapshot(manifest, checkpoint, tuple(lines))


def snapshots_to_prune(
    snapshots: Sequence[tuple[str, str, int]], now: dt.datetime, keep_days: int, keep: str
) -> list[str]:
    """Which snapshots are older than ``keep_days``.

    Args:
        snapshots: ``(name, checkpoint ts_utc, entries)`` of each snapshot.
        now: the current time.
        keep_days: ``snapshot.keep_days``.
        keep: a snapshot never pruned (the one just written).

    Returns:
        The names to prune: those whose checkpoint is more than ``keep_days``
        days before ``now``, never the newest (by time, then count) nor ``keep``.
    """
    if not snapshots:
        return []
    newest = max(snapshots, key=lambda item: (item[1], item[2]))[0]
    horizon = dt.timedelta(seconds=keep_days * _SECONDS_PER_DAY)
    return [
        name
        for name, ts_utc, _entries in snapshots
        if name not in {newest, keep} and now - parse_ts(ts_utc) > horizon
    ]


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    """What a recovery restores and what it loses.

    ``lost_lines`` counts lines of the damaged file that are not in the restored
    chain (a tampered line replaced by the snapshot's original counts as lost:
    its bytes survive only in the evidence file).
    """

    lines: tuple[bytes, ...]
    entries: int
    base_entries: int
    head_hash: str | None
    genesis_hash: str | None
    damaged_lines: int
    lost_lines: int
    first_lost_line: int | None
    reason: str | None
    damaged: ChainReport


def _link_start(damaged: Sequence[bytes], head: str) -> int | None:
    """The index of the first line that parses and links to ``head``."""
    for index, raw in enumerate(damaged):
        if not raw.endswith(b"\n") or raw.startswith(b"["):
            continue
        try:
            parsed = parse_line(raw[:-1])
        except EnvelopeFormatError:
            continue
        if parsed.prev_hash == head:
            return index
    return None


def plan_recovery(
    damaged: Sequence[bytes],
    trust: TrustStore,
    base: VerifiedSnapshot | None = None,
) -> RecoveryPlan:
    """The longest valid prefix of a damaged chain, on top of a verified snapshot.

    Args:
        damaged: the damaged file's raw lines (the last may be torn).
        trust: the home's trust store.
        base: a snapshot that verified, or ``None``.

    Returns:
        With ``base``: the snapshot's lines, then the damaged file's lines from
        the first one that links to the snapshot's head, for as long as they
        chain and verify. Without: the damaged file's longest verifying prefix.
    """
    damaged_report = _run(ChainVerifier(trust), damaged)
    restored: list[bytes] = list(base.lines) if base is not None else []
    kept: set[int] = set()
    continuation: ChainReport | None = None
    if base is None:
        count = damaged_report.entries
        restored.extend(damaged[:count])
        kept.update(range(1, count + 1))
        head = damaged_report.head_hash
    else:
        available = Counter(base.lines)
        for number, raw in enumerate(damaged, start=1):
            if available[raw] > 0:
                available[raw] -= 1
                kept.add(number)
        head = base.checkpoint.head_hash
        start = _link_start(damaged, head)
        if start is not None:
            verifier = ChainVerifier(trust, expected_prev=head, first_line=start + 1)
            continuation = _run(verifier, damaged[start:], first_line=start + 1)
            taken = damaged[start : start + continuation.entries]
            restored.extend(taken)
            kept.update(range(start + 1, start + 1 + len(taken)))
            head = continuation.head_hash or head
    lost = [number for number in range(1, len(damaged) + 1) if number not in kept]
    first_lost = lost[0] if lost else None
    return RecoveryPlan(
        lines=tuple(restored),
        entries=len(restored),
        base_entries=len(base.lines) if base is not None else 0,
        head_hash=head if restored else None,
        genesis_hash=line_hash(restored[0]) if restored else None,
        damaged_lines=len(damaged),
        lost_lines=len(lost),
        first_lost_line=first_lost,
        reason=_lost_reason(first_lost, damaged_report, continuation),
        damaged=damaged_report,
    )


def _lost_reason(
    line: int | None, damaged: ChainReport, continuation: ChainReport | None
) -> str | None:
    """Why line ``line`` of the damaged file was not restored."""
    if line is None:
        return None
    if continuation is not None and not continuation.ok and continuation.line == line:
        return continuation.reason
    if not damaged.ok and damaged.line == line:
        return damaged.reason
    return "not part of the restored chain (not in the snapshot, not linked to its head)"


__all__ = [
    "CHAIN_SUFFIX",
    "CHECKPOINT_SUFFIX",
    "MANIFEST_SUFFIX",
    "SNAPSHOT_FORMAT",
    "ChainCheck",
    "CheckpointError",
    "Manifest",
    "RecoveryPlan",
    "SnapshotFileError",
    "SnapshotInvalidError",
    "SnapshotRefusedError",
    "VerifiedSnapshot",
    "check_chain",
    "checkpoint_fits",
    "checkpoint_from_bytes",
    "document_bytes",
    "line_hash",
    "make_manifest",
    "manifest_from_bytes",
    "manifest_name_for",
    "manifest_signature_problem",
    "plan_recovery",
    "snapshot_stem",
    "snapshots_to_prune",
    "split_lines",
]
