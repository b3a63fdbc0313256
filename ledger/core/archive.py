"""The signed manifest of a ``ledger archive`` run (SPEC §21, Snapshots and retention).

It names the folder the segments went to and, for each, its number, the
SHA-256 of its compressed file and the head and entry count its checkpoint
seals, under the active writer key's signature. The home keeps it beside the
segments' own manifests, so the chain still verifies end to end when the
archive is given, and the part after it verifies without it.
"""

from typing import Any

from ledger.core.canonical import canonical_bytes
from ledger.core.checkpoint import Checkpoint, statement_signature_problem
from ledger.core.signing import Signer
from ledger.core.trust import TrustStore

ARCHIVE_FORMAT = "ledger-archive/1"


def archive_manifest(
    signer: Signer, ts_utc: str, target: str, segments: list[tuple[int, str, Checkpoint]]
) -> dict[str, Any]:
    """Sign the manifest of ``segments`` ((number, SHA-256, checkpoint)) moved to ``target``."""
    part: dict[str, Any] = {
        "format": ARCHIVE_FORMAT,
        "ts_utc": ts_utc,
        "to": target,
        "segments": [
            {
                "segment": number,
                "compressed_sha256": digest,
                "entries": checkpoint.entries,
                "head_hash": checkpoint.head_hash,
            }
            for number, digest, checkpoint in segments
        ],
        "signing_key_id": signer.key_id,
    }
    return {**part, "signature": signer.sign_b64(canonical_bytes(part))}


def archive_problem(document: dict[str, Any], trust: TrustStore) -> str | None:
    """Why an archive manifest's signature does not count, or ``None`` when it does."""
    try:
        part = {key: value for key, value in document.items() if key != "signature"}
        return statement_signature_problem(
            "archive manifest",
            str(document["ts_utc"]),
            part,
            str(document["signature"]),
            str(document["signing_key_id"]),
            trust,
        )
    except (KeyError, TypeError) as exc:
        return f"archive manifest: malformed ({exc})"
