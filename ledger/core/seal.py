"""Sealing a payload into a signed line (SPEC §2), as a pure function."""

import datetime as dt
from typing import Any, NamedTuple

from ledger.core.canonical import canonical_bytes, sha256_hex
from ledger.core.envelope import GENESIS, render_line, unsigned_entry
from ledger.core.events import validate_payload
from ledger.core.signing import Signer
from ledger.core.timefmt import format_ts, parse_ts


class SealedEntry(NamedTuple):
    """A line ready to append, with the hash the next entry will link to."""

    line: bytes
    entry_hash: str
    ts_utc: str
    entry: dict[str, Any]


def seal_time(now: dt.datetime, head_ts: str | None) -> dt.datetime:
    """The time an entry is sealed with: ``now``, but never before the chain's head.

    Timestamps in the chain never go backwards (SPEC §4 row 5); a clock that runs
    behind is reported by the gate, not written into the chain.
    """
    if head_ts is None:
        return now
    head = parse_ts(head_ts)
    return max(now, head)


def chain_time(now: dt.datetime, head_ts: str | None) -> dt.datetime:
    """The time a step under the chain lock decides at: the time it will seal with.

    Every deadline a step writes (reservation expiry, a countdown's end) and
    every deadline it compares is taken on this one clock, the one folds use
    (each entry's own ``ts_utc``). A writer whose clock runs behind the head
    would otherwise write reservations that are born expired. A head whose
    time cannot be read leaves ``now`` (the chain itself is then reported).
    """
    try:
        return seal_time(now, head_ts)
    except ValueError:
        return now


def seal(
    event_type: str,
    payload: dict[str, Any],
    schema: dict[str, Any],
    *,
    moment: dt.datetime,
    prev_hash: str | None,
    signer: Signer,
) -> SealedEntry:
    """Validate, canonicalize, sign and render one entry.

    Raises:
        SchemaValidationError: the payload does not match ``schema``.
        CanonicalizationError: the payload holds a float or an unrepresentable value.
    """
    validate_payload(event_type, payload, schema)
    ts_utc = format_ts(moment)
    entry = unsigned_entry(event_type, payload, ts_utc, prev_hash or GENESIS)
    preimage = canonical_bytes(entry)
    line = render_line(preimage, signer.sign_b64(preimage), signer.key_id)
    return SealedEntry(line, sha256_hex(preimage), ts_utc, entry)
