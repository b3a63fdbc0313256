"""Deterministic chains for tests: fixed seeds, fixed times, lines kept in memory.

Everything here is built with the product's own sealing code (``ledger.core.seal``)
from fixed Ed25519 seeds, so two runs produce the same bytes. ``foreign_line``
renders an entry the way another implementation of format 1.1.0 might.
"""

import base64
import datetime as dt
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.chain import ChainReport, verify_lines
from ledger.core.checkpoint import (
    Checkpoint,
    checkpoint_signature_problem,
    compare_with_checkpoint,
    make_checkpoint,
)
from ledger.core.envelope import parse_line
from ledger.core.seal import SealedEntry, seal
from ledger.core.signing import Signer, public_pem
from ledger.core.timefmt import format_ts
from ledger.core.trust import TrustedKey, TrustStore
from ledger.edges.schemas import load_schema

EVENT = "budget.record_call"
BASE_TIME = dt.datetime(2026, 11, 22, 8, 0, tzinfo=dt.UTC)
STEP = dt.timedelta(seconds=1)
# The order of SPEC §2's field table; what a naive writer of the format emits.
TABLE_ORDER = (
    "schema_version",
    "primitive_id",
    "event_type",
    "ts_utc",
    "prev_hash",
    "payload",
    "redaction_applied",
    "signature",
    "signing_key_id",
)


def signer(number: int) -> Signer:
    """A deterministic writer key: the seed is ``number`` repeated 32 times."""
    return Signer.from_private_key(Ed25519PrivateKey.from_private_bytes(bytes([number]) * 32))


def record_payload(index: int, provider: str = "openai") -> dict[str, Any]:
    """A valid ``budget.record_call`` payload that differs for each ``index``."""
    return {
        "provider": provider,
        "actual_micros": 1000 + index,
        "utc_day": "2026-11-22",
        "verdict_ref": None,
        "settled": False,
        "cycle_id": f"c-{index}",
    }


def moment(index: int, start: dt.datetime = BASE_TIME) -> dt.datetime:
    """The sealed time of entry ``index`` (0-based) of a test chain."""
    return start + index * STEP


def build_chain(
    count: int,
    key: Signer,
    *,
    start: dt.datetime = BASE_TIME,
    prev_hash: str | None = None,
    first_index: int = 0,
    provider: str = "openai",
) -> list[SealedEntry]:
    """``count`` sealed entries, one second apart, linked from ``prev_hash``."""
    schema = load_schema(EVENT)
    entries: list[SealedEntry] = []
    prev = prev_hash
    for offset in range(count):
        index = first_index + offset
        sealed = seal(
            EVENT,
            record_payload(index, provider),
            schema,
            moment=moment(index, start),
            prev_hash=prev,
            signer=key,
        )
        entries.append(sealed)
        prev = sealed.entry_hash
    return entries


def lines_of(entries: Iterable[SealedEntry]) -> list[bytes]:
    """The raw lines (each with its ``\\n``)."""
    return [entry.line for entry in entries]


def trust_for(
    *keys: Signer, strict_after: dt.datetime | None = None, any_id: Sequence[Signer] = ()
) -> TrustStore:
    """A trust store naming each key, valid forever."""
    store = TrustStore(
        keys=tuple(TrustedKey(k.key_id, k.public_raw) for k in keys), strict_after=strict_after
    )
    for key in any_id:
        store = store.with_any_id_key(key.public_raw)
    return store


def entry_hash(line: bytes) -> str:
    """The hash the next entry links to."""
    return parse_line(line.rstrip(b"\n")).entry_hash


def full_entry(line: bytes) -> dict[str, Any]:
    """The whole entry of one of our lines, signature fields included."""
    parsed = parse_line(line.rstrip(b"\n"))
    return {
        **parsed.entry,
        "signature": parsed.signature,
        "signing_key_id": parsed.signing_key_id,
    }


def foreign_line(line: bytes, style: str) -> bytes:
    """One of our lines as another writer of format 1.1.0 would render it.

    Styles: ``jcs`` (RFC 8785 of the whole entry, signature fields included),
    ``reversed`` (keys in reverse order, ``json.dumps`` spacing), ``table``
    (SPEC §2's field order, compact separators), ``unsigned`` (RFC 8785 of the
    entry without its signature fields: a stripped signature).
    """
    entry = full_entry(line)
    if style == "jcs":
        return bytes(rfc8785.dumps(entry)) + b"\n"
    if style == "reversed":
        shuffled = {key: entry[key] for key in sorted(entry, reverse=True)}
        payload = entry["payload"]
        shuffled["payload"] = {key: payload[key] for key in sorted(payload, reverse=True)}
        return json.dumps(shuffled, ensure_ascii=False).encode("utf-8") + b"\n"
    if style == "table":
        ordered = {key: entry[key] for key in TABLE_ORDER}
        return json.dumps(ordered, separators=(",", ":")).encode("utf-8") + b"\n"
    if style == "unsigned":
        del entry["signature"], entry["signing_key_id"]
        return bytes(rfc8785.dumps(entry)) + b"\n"
    raise ValueError(f"unknown style {style!r}")


def checkpoint_of(lines: Sequence[bytes], key: Signer, entries: int | None = None) -> Checkpoint:
    """A checkpoint signed by ``key`` of the first ``entries`` lines (all by default)."""
    count = len(lines) if entries is None else entries
    return make_checkpoint(
        key,
        entry_hash(lines[0]),
        count,
        entry_hash(lines[count - 1]),
        format_ts(moment(count + 1000)),
    )


def verify_with_checkpoint(
    lines: Sequence[bytes], trust: TrustStore, checkpoint: Checkpoint | None = None
) -> tuple[int | None, str] | None:
    """In memory, what ``verify-chain`` does: ``(line, reason)`` of the first failure."""
    report: ChainReport = verify_lines(lines, trust)
    if not report.ok:
        return report.line, report.reason or ""
    if checkpoint is None:
        return None
    problem = checkpoint_signature_problem(checkpoint, trust)
    if problem is not None:
        return None, problem
    hash_at_count = None
    if report.entries >= checkpoint.entries:
        hash_at_count = entry_hash(lines[checkpoint.entries - 1])
    return compare_with_checkpoint(report, checkpoint, hash_at_count)


def write_lines(path: Path, lines: Iterable[bytes]) -> Path:
    """Write raw lines to a file."""
    path.write_bytes(b"".join(lines))
    return path


def write_public_pem(path: Path, key: Signer) -> Path:
    """Write a key's public half as a PEM file."""
    path.write_bytes(public_pem(key.public_raw))
    return path


def b64(data: bytes) -> str:
    """Standard padded base64."""
    return base64.b64encode(data).decode("ascii")
