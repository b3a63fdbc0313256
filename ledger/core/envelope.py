"""The chain entry (format 1.1.0, SPEC §2): building, rendering and parsing lines.

An entry's *canonical bytes* are the RFC 8785 form of the entry without
``signature`` and ``signing_key_id``; ``prev_hash`` of the next entry is their
SHA-256. Our writer renders a line as those canonical bytes with the two
signature fields spliced in before the closing brace, so a verifier can take
the signed bytes of such a line by slicing, once one re-rendering has shown the
slice canonical; every other line, and any slice that check cannot vouch for,
is re-canonicalized through ``rfc8785``.
"""

import datetime as dt
import json
import re
from typing import Any, NamedTuple

from ledger.core.canonical import canonical_bytes, sha256_hex
from ledger.errors import CanonicalizationError

SCHEMA_VERSION = "1.1.0"
PRIMITIVE_ID = "L2"
GENESIS = "GENESIS"
ENVELOPE_FIELDS = frozenset(
    {
        "schema_version",
        "primitive_id",
        "event_type",
        "ts_utc",
        "prev_hash",
        "payload",
        "redaction_applied",
        "signature",
        "signing_key_id",
    }
)
SIGNATURE_FIELDS = ("signature", "signing_key_id")
_UNSIGNED_FIELDS = ENVELOPE_FIELDS - set(SIGNATURE_FIELDS)

EVENT_TYPE_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
KEY_ID_RE = re.compile(r"^[a-z0-9_-]+$")
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
_B64_RE = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
# The exact tail our writer appends (matched to the end of the line).
_OUR_TAIL_RE = re.compile(
    rb',"signature":"([A-Za-z0-9+/]+={0,2})","signing_key_id":"([a-z0-9_-]+)"}'
)
_TAIL_MARK = b',"signature":"'
_MAX_SAFE_INT = 2**53 - 1


class EnvelopeFormatError(ValueError):
    """A line is not a well-formed 1.1.0 envelope; the message says why."""


class ParsedEntry(NamedTuple):
    """One verified-shape line: the unsigned entry, its signed bytes and its hash."""

    entry: dict[str, Any]
    preimage: bytes
    entry_hash: str
    signature: str | None
    signing_key_id: str | None

    @property
    def prev_hash(self) -> str:
        """The link to the entry before (``GENESIS`` for the first)."""
        return str(self.entry["prev_hash"])

    @property
    def ts_utc(self) -> str:
        """The entry's sealed time."""
        return str(self.entry["ts_utc"])

    @property
    def event_type(self) -> str:
        """The entry's event type."""
        return str(self.entry["event_type"])

    @property
    def payload(self) -> dict[str, Any]:
        """The entry's payload object."""
        payload: dict[str, Any] = self.entry["payload"]
        return payload


def unsigned_entry(
    event_type: str,
    payload: dict[str, Any],
    ts_utc: str,
    prev_hash: str,
    redaction_applied: list[str] | None = None,
) -> dict[str, Any]:
    """The entry as signed: every envelope field but the two signature fields."""
    return {
        "schema_version": SCHEMA_VERSION,
        "primitive_id": PRIMITIVE_ID,
        "event_type": event_type,
        "ts_utc": ts_utc,
        "prev_hash": prev_hash,
        "payload": payload,
        "redaction_applied": redaction_applied,
    }


def render_line(preimage: bytes, signature_b64: str, key_id: str) -> bytes:
    """Our line: the canonical bytes with the signature fields before the last brace.

    The result is one JSON object followed by ``\\n``.
    """
    tail = f',"signature":"{signature_b64}","signing_key_id":"{key_id}"}}\n'
    return preimage[:-1] + tail.encode("ascii")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise EnvelopeFormatError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _check_fields(entry: dict[str, Any]) -> None:
    if entry.get("schema_version") != SCHEMA_VERSION:
        raise EnvelopeFormatError(f"schema_version is not {SCHEMA_VERSION!r}")
    if not isinstance(entry.get("primitive_id"), str) or not entry["primitive_id"]:
        raise EnvelopeFormatError("primitive_id missing")
    event_type = entry.get("event_type")
    if not isinstance(event_type, str) or not EVENT_TYPE_RE.fullmatch(event_type):
        raise EnvelopeFormatError("event_type missing or malformed")
    ts = entry.get("ts_utc")
    if not isinstance(ts, str) or not _TS_RE.fullmatch(ts):
        raise EnvelopeFormatError("ts_utc missing or not YYYY-MM-DDTHH:MM:SS.ffffffZ")
    try:
        dt.datetime.fromisoformat(ts)
    except ValueError as exc:
        raise EnvelopeFormatError(f"ts_utc is not a real time: {ts}") from exc
    prev = entry.get("prev_hash")
    if prev != GENESIS and (not isinstance(prev, str) or not _HASH_RE.fullmatch(prev)):
        raise EnvelopeFormatError("prev_hash is neither GENESIS nor lowercase SHA-256 hex")
    if not isinstance(entry.get("payload"), dict):
        raise EnvelopeFormatError("payload is not an object")
    redaction = entry.get("redaction_applied")
    if redaction is not None and (
        not isinstance(redaction, list) or not all(isinstance(r, str) for r in redaction)
    ):
        raise EnvelopeFormatError("redaction_applied is neither null nor a list of ids")


def parse_line(line: bytes) -> ParsedEntry:
    """Parse one line (without its ``\\n``) into its signed bytes and fields.

    Raises:
        EnvelopeFormatError: not UTF-8, not a JSON object, an unknown or missing
            field, a malformed field, or a value RFC 8785 cannot represent.
    """
    # The tail holds no second mark, so the last mark is where a tail would start.
    start = line.rfind(_TAIL_MARK)
    match = _OUR_TAIL_RE.fullmatch(line, start) if start > 0 else None
    if match is not None:
        preimage = line[:start] + b"}"
        entry = _canonical_entry(preimage)
        if entry is not None:
            _check_fields(entry)
            return ParsedEntry(
                entry=entry,
                preimage=preimage,
                entry_hash=sha256_hex(preimage),
                signature=match.group(1).decode("ascii"),
                signing_key_id=match.group(2).decode("ascii"),
            )
    return _parse_foreign_line(line)


class _NotPlainError(Exception):
    """A value the fast path leaves to ``rfc8785``."""


def _not_plain(_text: str) -> Any:
    raise _NotPlainError


def _safe_int(text: str) -> int:
    value = int(text)
    if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
        return value
    raise _NotPlainError


# Floats, NaN/Infinity and integers beyond 2**53 - 1 are where json and RFC 8785
# part ways (or where RFC 8785 refuses), so the decoder stops at them.
_PLAIN_DECODER = json.JSONDecoder(
    parse_float=_not_plain, parse_int=_safe_int, parse_constant=_not_plain
)
# ensure_ascii=False: RFC 8785 writes characters, never \uXXXX for printable ones.
# Decoded JSON holds no cycles, so the encoder need not look for them.
_CANONICAL_ENCODER = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), check_circular=False
)


def _canonical_entry(preimage: bytes) -> dict[str, Any] | None:
    """The unsigned entry if ``preimage`` is already its RFC 8785 form, else ``None``.

    For values whose strings are all ASCII and whose numbers are all safe
    integers, RFC 8785 and ``json.dumps`` with sorted keys, compact separators
    and ``ensure_ascii=False`` produce the same text (key order by UTF-16 units
    and by code points agree on ASCII; strings escape alike; integers print
    alike), so one comparison proves the body canonical. A ``\\uXXXX`` escape of
    any character RFC 8785 writes as itself re-renders as that character, which
    differs from the ASCII input. Anything else (whitespace, another key order,
    repeated keys, other escapes, floats, large integers, non-ASCII bytes, a
    missing or extra field) goes the slow way, which decides it alone.
    """
    if not preimage.isascii():
        return None
    text = preimage.decode("ascii")
    try:
        # raw_decode skips decode's whitespace handling: canonical text has none.
        entry, end = _PLAIN_DECODER.raw_decode(text)
        if end != len(text) or type(entry) is not dict or entry.keys() != _UNSIGNED_FIELDS:
            return None
        if _CANONICAL_ENCODER.encode(entry) != text:
            return None
    except (_NotPlainError, ValueError, RecursionError):
        return None
    return entry


def _parse_foreign_line(line: bytes) -> ParsedEntry:
    try:
        text = line.decode("utf-8")
        entry = json.loads(text, object_pairs_hook=_no_duplicates)
    except EnvelopeFormatError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise EnvelopeFormatError(f"not JSON: {exc}") from exc
    if not isinstance(entry, dict):
        raise EnvelopeFormatError("not a JSON object")
    unknown = set(entry) - ENVELOPE_FIELDS
    if unknown:
        raise EnvelopeFormatError(f"unknown top-level field {min(unknown)!r}")
    if "redaction_applied" not in entry:
        raise EnvelopeFormatError("redaction_applied missing")
    _check_fields(entry)
    signature = entry.pop("signature", None)
    key_id = entry.pop("signing_key_id", None)
    if signature is not None and (
        not isinstance(signature, str) or not _B64_RE.fullmatch(signature)
    ):
        raise EnvelopeFormatError("signature is not standard padded base64")
    if key_id is not None and (not isinstance(key_id, str) or not KEY_ID_RE.fullmatch(key_id)):
        raise EnvelopeFormatError("signing_key_id malformed")
    if signature == "":
        signature = None
    try:
        preimage = canonical_bytes(entry, allow_floats=True)
    except CanonicalizationError as exc:
        raise EnvelopeFormatError(str(exc)) from exc
    return ParsedEntry(
        entry=entry,
        preimage=preimage,
        entry_hash=sha256_hex(preimage),
        signature=signature,
        signing_key_id=key_id,
    )
