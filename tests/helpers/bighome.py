"""A home with a long chain, built in seconds: one entry canonicalized, the rest spliced.

Every entry is a ``budget.record_call`` on a fixed past day, sealed a
fixed step (a millisecond unless told) after the one before and signed with the home's own writer key, so
the chain verifies exactly as one the product wrote. Only the time, its UTC day and
the link to the previous entry differ between entries: the canonical bytes are
the template's with those fields replaced (all fixed-width strings), which
spares canonicalizing every entry.
"""

import datetime as dt
import hashlib
import os
from pathlib import Path

from ledger.core.canonical import canonical_bytes
from ledger.core.envelope import render_line, unsigned_entry
from ledger.core.timefmt import format_ts
from ledger.edges.files.chainfile import ChainFile
from ledger.runtime import Runtime
from ledger.services.chain.writer import Writer
from tests.helpers.chains import EVENT, record_payload
from tests.helpers.segments import seal_every as set_segment_entries

START = dt.datetime(2026, 11, 22, 8, 0, tzinfo=dt.UTC)
_TS_MARK = "1999-12-31T23:59:59.999999Z"
_PREV_MARK = "e" * 64
_DAY_MARK = "1999-12-30"
_WRITE_EVERY = 10_000  # lines held before they are written: a long chain needs no memory


def append_entries(
    home: Path,
    count: int,
    env: dict[str, str],
    step: dt.timedelta = dt.timedelta(milliseconds=1),
    *,
    signed: bool = True,
    seal_every: int | None = None,
) -> int:
    """Append ``count`` entries, ``step`` apart, to the home's empty chain; returns its bytes.

    ``signed=False`` leaves them unsigned (SPEC §2 allows that before the trust
    store's ``strict_after``: initialise the home later than ``START``), which
    builds and verifies many times faster: for tests of how the chain's length
    is handled rather than of signatures.

    ``seal_every`` seals the open segment with the product's own sealing each
    time it holds that many entries (the home's ``chain.segment_entries`` is set
    to it), so a long chain is built as the product would have left it.
    """
    every = seal_every or 0
    if every:
        set_segment_entries(home, every)
    signer = Writer(Runtime(home, env)).signer() if signed else None
    payload = {**record_payload(0), "utc_day": _DAY_MARK}
    template = canonical_bytes(unsigned_entry(EVENT, payload, _TS_MARK, _PREV_MARK))
    before_ts, after_ts = template.split(_TS_MARK.encode())
    prev = "GENESIS"
    lines: list[bytes] = []
    size = 0
    handle = (home / "events.jsonl").open("ab")
    try:
        for index in range(count):
            moment = format_ts(START + index * step).encode()
            if index == 0:  # "GENESIS" is shorter than a hash: this one is canonicalized
                first = {**payload, "utc_day": moment[:10].decode()}
                preimage = canonical_bytes(unsigned_entry(EVENT, first, moment.decode(), prev))
            else:
                preimage = (
                    (before_ts + moment + after_ts)
                    .replace(_PREV_MARK.encode(), prev.encode(), 1)
                    .replace(_DAY_MARK.encode(), moment[:10], 1)
                )
            if signer is None:
                lines.append(preimage + b"\n")
            else:
                lines.append(render_line(preimage, signer.sign_b64(preimage), signer.key_id))
            prev = hashlib.sha256(preimage).hexdigest()
            segment_full = every > 0 and (index + 1) % every == 0
            if len(lines) >= _WRITE_EVERY or segment_full:
                size += handle.write(b"".join(lines))
                lines = []
            if segment_full and index + 1 < count:
                handle.close()  # the seal replaces the open file
                _seal(home, env)
                handle = (home / "events.jsonl").open("ab")
        size += handle.write(b"".join(lines))
        handle.flush()
        os.fsync(handle.fileno())
    finally:
        handle.close()
    return size


def _seal(home: Path, env: dict[str, str]) -> None:
    """Seal the open segment as a writer would (it holds ``chain.segment_entries``)."""
    runtime = Runtime(home, env)
    signer = Writer(runtime).signer()
    chain = runtime.chain
    assert isinstance(chain, ChainFile)
    with chain.transaction() as transaction:
        transaction.seal_if_due(signer)
    assert (home / "events.jsonl").stat().st_size == 0, "the open segment was not sealed"
