"""Signed checkpoints: they make a cut tail visible (SPEC §2, Truncation).

A checkpoint binds the chain's identity (the hash of its first entry), its entry
count and its head hash, under a writer's signature. A log shorter than a
checkpoint, or one whose entry at the checkpoint's count hashes differently,
has lost or replaced entries. Checkpoints also carry the RFC 9162 tree head
(``tree_size``, ``root_hash``) over the entries' hashes (SPEC §10); older
checkpoints without it still verify, and the signature covers it when present.
"""

import re
from dataclasses import dataclass
from typing import Any

from ledger.core.canonical import canonical_bytes
from ledger.core.chain import ChainReport
from ledger.core.envelope import ParsedEntry
from ledger.core.signing import Signer
from ledger.core.timefmt import parse_ts
from ledger.core.trust import TrustStore
from ledger.errors import InputDataError

CHECKPOINT_FORMAT = "ledger-checkpoint/1"
_ROOT_RE = re.compile(r"[0-9a-f]{64}")


class CheckpointError(InputDataError):
    """A checkpoint file is malformed or its signature does not verify."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A signed statement of what the chain held at one moment."""

    chain_id: str
    entries: int
    head_hash: str
    ts_utc: str
    signing_key_id: str
    signature: str
    tree_size: int | None = None
    root_hash: str | None = None

    def signed_part(self) -> dict[str, Any]:
        """The fields the signature covers (the tree head only when present)."""
        part: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT,
            "chain_id": self.chain_id,
            "entries": self.entries,
            "head_hash": self.head_hash,
            "ts_utc": self.ts_utc,
            "signing_key_id": self.signing_key_id,
        }
        if self.tree_size is not None and self.root_hash is not None:
            part["tree_size"] = self.tree_size
            part["root_hash"] = self.root_hash
        return part

    def to_document(self) -> dict[str, Any]:
        """The JSON form stored on disk."""
        return {**self.signed_part(), "signature": self.signature}


def make_checkpoint(
    signer: Signer,
    chain_id: str,
    entries: int,
    head_hash: str,
    ts_utc: str,
    root_hash: str | None = None,
) -> Checkpoint:
    """Sign a checkpoint of a verified chain's head (and its tree root, if given)."""
    tree_size = None if root_hash is None else entries
    unsigned = Checkpoint(
        chain_id, entries, head_hash, ts_utc, signer.key_id, "", tree_size, root_hash
    )
    signature = signer.sign_b64(canonical_bytes(unsigned.signed_part()))
    return Checkpoint(
        chain_id, entries, head_hash, ts_utc, signer.key_id, signature, tree_size, root_hash
    )


def checkpoint_from_document(document: Any, source: str) -> Checkpoint:
    """Read a checkpoint document (signature not yet checked).

    Raises:
        CheckpointError: a field is missing or of the wrong type.
    """
    try:
        if document["format"] != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{source}: not a {CHECKPOINT_FORMAT} document")
        checkpoint = Checkpoint(
            chain_id=str(document["chain_id"]),
            entries=document["entries"],
            head_hash=str(document["head_hash"]),
            ts_utc=str(document["ts_utc"]),
            signing_key_id=str(document["signing_key_id"]),
            signature=str(document["signature"]),
            tree_size=document.get("tree_size"),
            root_hash=document.get("root_hash"),
        )
        parse_ts(checkpoint.ts_utc)
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{source}: malformed checkpoint: {exc}") from exc
    entries: object = checkpoint.entries
    if isinstance(entries, bool) or not isinstance(entries, int) or entries < 1:
        raise CheckpointError(f"{source}: entries must be a positive integer")
    if (checkpoint.tree_size is None) != (checkpoint.root_hash is None) or (
        checkpoint.tree_size is not None
        and (
            checkpoint.tree_size != entries
            or not isinstance(checkpoint.root_hash, str)
            or not _ROOT_RE.fullmatch(checkpoint.root_hash)
        )
    ):
        raise CheckpointError(
            f"{source}: tree_size must equal entries and root_hash be 64 hex digits"
        )
    return checkpoint


def statement_signature_problem(
    what: str,
    ts_utc: str,
    signed_part: dict[str, Any],
    signature: str,
    signing_key_id: str,
    trust: TrustStore,
) -> str | None:
    """Why a signed statement's signature does not count, or ``None`` when it does.

    A checkpoint or a snapshot manifest is held to the rules of a chain entry
    (SPEC §2, Keys and trust) at its own time, with a signature required;
    ``what`` names it in the problem.
    """
    as_entry = ParsedEntry(
        entry={"ts_utc": ts_utc},
        preimage=canonical_bytes(signed_part),
        entry_hash="",
        signature=signature,
        signing_key_id=signing_key_id,
    )
    problem = trust.signature_problem(as_entry, strict=True)
    return None if problem is None else f"{what}: {problem}"


def checkpoint_signature_problem(checkpoint: Checkpoint, trust: TrustStore) -> str | None:
    """Why the checkpoint's signature does not count, or ``None``."""
    return statement_signature_problem(
        "checkpoint",
        checkpoint.ts_utc,
        checkpoint.signed_part(),
        checkpoint.signature,
        checkpoint.signing_key_id,
        trust,
    )


def compare_with_checkpoint(
    report: ChainReport, checkpoint: Checkpoint, hash_at_count: str | None
) -> tuple[int, str] | None:
    """Where a verified chain departs from a checkpoint: ``(line, reason)`` or ``None``.

    Args:
        report: the verified chain's report.
        checkpoint: a checkpoint whose signature has been checked.
        hash_at_count: the hash of the chain's entry number ``checkpoint.entries``
            (``None`` if the chain is shorter).
    """
    if report.entries and report.genesis_hash != checkpoint.chain_id:
        return 1, "chain identity differs from the checkpoint's"
    if report.entries < checkpoint.entries:
        return (
            report.lines + 1,
            (
                f"entry missing: checkpoint has {checkpoint.entries} entries, "
                f"log has {report.entries} (truncated)"
            ),
        )
    if hash_at_count != checkpoint.head_hash:
        return (
            checkpoint.entries,
            "entry differs from the checkpoint's head (truncated and re-appended?)",
        )
    return None
