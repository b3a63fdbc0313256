"""Checking a printed proof against signed checkpoints, offline (SPEC §10).

``verify-proof`` reads a proof document (``prove inclusion`` or ``prove
consistency`` output), one or two checkpoints and, optionally, the entry line
the proof is about. Everything here is pure: the command reads the files.
"""

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from ledger.core.checkpoint import Checkpoint, checkpoint_signature_problem
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.merkle import leaf_hash, verify_consistency, verify_inclusion
from ledger.core.trust import TrustStore
from ledger.errors import InputDataError

_HEX64 = re.compile(r"[0-9a-f]{64}")
INCLUSION_FIELDS = ("leaf_index", "tree_size", "root_hash", "entry_hash", "audit_path")
CONSISTENCY_FIELDS = ("old_size", "new_size", "old_root", "new_root", "proof")


class ProofVerdict(NamedTuple):
    """Whether a proof holds, and if not, why."""

    ok: bool
    kind: str
    reason: str | None


def _size(document: dict[str, Any], key: str, source: str) -> int:
    value = document[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputDataError(f"{source}: {key} must be a non-negative integer")
    return value


def _hash(value: Any, key: str, source: str) -> bytes:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise InputDataError(f"{source}: {key} must be 64 lowercase hex digits")
    return bytes.fromhex(value)


def _hashes(value: Any, key: str, source: str) -> list[bytes]:
    if not isinstance(value, list):
        raise InputDataError(f"{source}: {key} must be a list of hashes")
    return [_hash(item, key, source) for item in value]


def _checked(checkpoints: Sequence[Checkpoint], trust: TrustStore) -> str | None:
    for checkpoint in checkpoints:
        problem = checkpoint_signature_problem(checkpoint, trust)
        if problem is not None:
            return problem
        if checkpoint.tree_size is None:
            return "the checkpoint has no tree head (tree_size, root_hash)"
    return None


def proof_kind(document: Any, source: str) -> str:
    """``"inclusion"`` or ``"consistency"``.

    Raises:
        InputDataError: the document is neither.
    """
    if isinstance(document, dict) and all(k in document for k in INCLUSION_FIELDS):
        return "inclusion"
    if isinstance(document, dict) and all(k in document for k in CONSISTENCY_FIELDS):
        return "consistency"
    raise InputDataError(f"{source}: not an inclusion or consistency proof")


def check_proof(
    document: Any,
    checkpoints: Sequence[Checkpoint],
    trust: TrustStore,
    entry_line: bytes | None = None,
    source: str = "proof",
) -> ProofVerdict:
    """Whether ``document`` proves what it says against the signed ``checkpoints``.

    An inclusion proof must name the tree head of one given checkpoint; a
    consistency proof must match each given checkpoint on its old or new side.
    ``entry_line`` (an inclusion proof only) must be the entry the proof names.

    Raises:
        InputDataError: the proof or the entry line cannot be read as one.
    """
    kind = proof_kind(document, source)
    problem = _checked(checkpoints, trust)
    if problem is not None:
        return ProofVerdict(False, kind, problem)
    if kind == "inclusion":
        return _check_inclusion(document, checkpoints, entry_line, source)
    if entry_line is not None:
        raise InputDataError("--entry: only an inclusion proof names an entry")
    return _check_consistency(document, checkpoints, source)


def _check_inclusion(
    document: dict[str, Any],
    checkpoints: Sequence[Checkpoint],
    entry_line: bytes | None,
    source: str,
) -> ProofVerdict:
    index = _size(document, "leaf_index", source)
    size = _size(document, "tree_size", source)
    root = _hash(document["root_hash"], "root_hash", source)
    entry = _hash(document["entry_hash"], "entry_hash", source)
    path = _hashes(document["audit_path"], "audit_path", source)
    for checkpoint in checkpoints:
        if (checkpoint.tree_size, checkpoint.root_hash) != (size, root.hex()):
            return ProofVerdict(
                False,
                "inclusion",
                f"the proof is for tree size {size} root {root.hex()}, the checkpoint has "
                f"{checkpoint.tree_size} root {checkpoint.root_hash}",
            )
    if entry_line is not None:
        try:
            named = parse_line(entry_line.rstrip(b"\n"))
        except EnvelopeFormatError as exc:
            raise InputDataError(f"--entry: not a chain entry: {exc}") from exc
        if named.entry_hash != entry.hex():
            return ProofVerdict(
                False,
                "inclusion",
                f"the entry's hash is {named.entry_hash}, the proof names {entry.hex()}",
            )
    if not verify_inclusion(index, size, leaf_hash(entry), path, root):
        return ProofVerdict(False, "inclusion", "the audit path does not lead to the root")
    return ProofVerdict(True, "inclusion", None)


def _check_consistency(
    document: dict[str, Any], checkpoints: Sequence[Checkpoint], source: str
) -> ProofVerdict:
    old_size = _size(document, "old_size", source)
    new_size = _size(document, "new_size", source)
    old_root = _hash(document["old_root"], "old_root", source)
    new_root = _hash(document["new_root"], "new_root", source)
    path = _hashes(document["proof"], "proof", source)
    sides = {(old_size, old_root.hex()), (new_size, new_root.hex())}
    for checkpoint in checkpoints:
        if (checkpoint.tree_size, checkpoint.root_hash) not in sides:
            return ProofVerdict(
                False,
                "consistency",
                f"the checkpoint's tree ({checkpoint.tree_size}, {checkpoint.root_hash}) "
                "is neither side of the proof",
            )
    if not verify_consistency(old_size, new_size, old_root, new_root, path):
        return ProofVerdict(False, "consistency", "the proof does not join the two roots")
    return ProofVerdict(True, "consistency", None)
