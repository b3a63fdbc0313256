"""Snapshot documents as pure values (SPEC §5, Snapshot): format, names, signing, parsing.

**Snapshot format** ``ledger-snapshot/1``: three sibling files in the home's
``snapshots/`` folder sharing the stem
``snapshot-<YYYYMMDDTHHMMSSffffffZ>-<entries, 12 digits>``:

* ``<stem>.jsonl.gz``: the verified chain, byte for byte, gzip-compressed;
* ``<stem>.checkpoint.json``: the signed checkpoint of that chain (SPEC §2,
  Truncation), the same document that is written to ``checkpoints/``;
* ``<stem>.manifest.json``: the manifest, which binds the two together under the
  signature of the active writer key (and, for a chain sealed in segments, the
  copies of its sealed segments in ``snapshots/segments/``, each copied once
  and shared by every snapshot after: ``"segments": [[name, sha256], ...]``;
  the chain file then holds the lines after them)::

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

This module writes and reads the documents; what depends on a trust store to
decide whether they count lives beside it: ``ledger.core.chain_check`` checks a
chain held as raw lines, ``ledger.core.snapshot_check`` checks a snapshot, and
``ledger.core.recovery`` plans a recovery on top of one.
"""

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from ledger.core.canonical import canonical_bytes, sha256_hex
from ledger.core.checkpoint import Checkpoint, CheckpointError, checkpoint_from_document
from ledger.core.signing import Signer
from ledger.core.timefmt import parse_ts
from ledger.errors import InputDataError, LedgerError

SNAPSHOT_FORMAT = "ledger-snapshot/1"
CHAIN_SUFFIX = ".jsonl.gz"
CHECKPOINT_SUFFIX = ".checkpoint.json"
MANIFEST_SUFFIX = ".manifest.json"
SNAPSHOT_PREFIX = "snapshot-"

# Sibling file names only: a manifest must never point outside its own folder.
_SIBLING_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_SEGMENT_COPY_RE = re.compile(r"^segments/[0-9]{6}-[0-9a-f]{16}\.jsonl\.zst$")
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
    # Copies of sealed segments the chain begins with, shared by snapshots:
    # (name under the snapshot folder, SHA-256 of the compressed file). The
    # chain file then holds only the lines after them.
    segments: tuple[tuple[str, str], ...] = ()

    def signed_part(self) -> dict[str, Any]:
        """The fields the signature covers (everything but the signature)."""
        part = self._fields()
        if self.segments:
            part["segments"] = [list(item) for item in self.segments]
        return part

    def _fields(self) -> dict[str, Any]:
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
    return make_manifest_of(
        signer,
        checkpoint,
        stem=stem,
        chain_sha256=sha256_hex(chain_gz),
        raw_sha256=sha256_hex(raw_chain),
        checkpoint_file=checkpoint_file,
    )


def make_manifest_of(
    signer: Signer,
    checkpoint: Checkpoint,
    *,
    stem: str,
    chain_sha256: str,
    raw_sha256: str,
    checkpoint_file: bytes,
    segments: tuple[tuple[str, str], ...] = (),
) -> Manifest:
    """Sign a snapshot's manifest given the hashes of its chain file (compressed, raw).

    With ``segments`` (copies of the sealed segments the chain begins with) the
    chain file holds, and ``raw_sha256`` hashes, only the lines after them.
    """
    unsigned = Manifest(
        ts_utc=checkpoint.ts_utc,
        chain_id=checkpoint.chain_id,
        entries=checkpoint.entries,
        head_hash=checkpoint.head_hash,
        chain_file=stem + CHAIN_SUFFIX,
        chain_sha256=chain_sha256,
        raw_sha256=raw_sha256,
        checkpoint_file=stem + CHECKPOINT_SUFFIX,
        checkpoint_sha256=sha256_hex(checkpoint_file),
        signing_key_id=signer.key_id,
        signature="",
        segments=segments,
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
    names = [field.name for field in fields(Manifest) if field.name != "segments"]
    missing = [name for name in names if name not in document]
    if missing:
        raise SnapshotFileError(f"{source}: manifest field {missing[0]!r} missing")
    if any(not isinstance(document[name], str) for name in names if name != "entries"):
        raise SnapshotFileError(f"{source}: a manifest field is not a string")
    segments = document.get("segments", [])
    if not isinstance(segments, list) or not all(
        isinstance(item, list) and len(item) == 2 and all(isinstance(v, str) for v in item)  # noqa: PLR2004
        for item in segments
    ):
        raise SnapshotFileError(f"{source}: manifest segments must be [name, sha256] pairs")
    manifest = Manifest(
        **{name: document[name] for name in names},
        segments=tuple((str(name), str(digest)) for name, digest in segments),
    )
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
    for name, digest in manifest.segments:
        if not _SEGMENT_COPY_RE.fullmatch(name) or not _HASH_RE.fullmatch(digest):
            return f"segment copy {name!r} is not segments/<name>.jsonl.zst with a SHA-256"
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


__all__ = [
    "CHAIN_SUFFIX",
    "CHECKPOINT_SUFFIX",
    "MANIFEST_SUFFIX",
    "SNAPSHOT_FORMAT",
    "CheckpointError",
    "Manifest",
    "SnapshotFileError",
    "SnapshotInvalidError",
    "SnapshotRefusedError",
    "checkpoint_from_bytes",
    "document_bytes",
    "make_manifest",
    "manifest_from_bytes",
    "manifest_name_for",
    "snapshot_stem",
    "snapshots_to_prune",
]
