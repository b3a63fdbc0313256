"""A home with a long chain, built in seconds: one entry canonicalized, the rest spliced.

Every entry is a ``budget.record_call`` on a fixed past day, sealed one
millisecond after the one before and signed with the home's own writer key, so
the chain verifies exactly as one the product wrote. Only the time and the link
to the previous entry differ between entries: the canonical bytes are the
template's with those two fields replaced (both are fixed-width strings), which
spares canonicalizing every entry.
"""

import datetime as dt
import hashlib
import os
from pathlib import Path

from ledger.core.canonical import canonical_bytes
from ledger.core.envelope import render_line, unsigned_entry
from ledger.core.timefmt import format_ts
from ledger.runtime import Runtime
from ledger.services.chain.writer import Writer
from tests.helpers.chains import EVENT, record_payload

START = dt.datetime(2026, 11, 22, 8, 0, tzinfo=dt.UTC)
_TS_MARK = "1999-12-31T23:59:59.999999Z"
_PREV_MARK = "e" * 64


def append_entries(home: Path, count: int, env: dict[str, str]) -> int:
    """Append ``count`` signed entries to the home's (empty) chain; returns its size in bytes."""
    signer = Writer(Runtime(home, env)).signer()
    template = canonical_bytes(unsigned_entry(EVENT, record_payload(0), _TS_MARK, _PREV_MARK))
    before_ts, after_ts = template.split(_TS_MARK.encode())
    prev = "GENESIS"
    lines = []
    for index in range(count):
        moment = format_ts(START + dt.timedelta(milliseconds=index)).encode()
        if index == 0:  # "GENESIS" is shorter than a hash: this one is canonicalized
            preimage = canonical_bytes(
                unsigned_entry(EVENT, record_payload(0), moment.decode(), prev)
            )
        else:
            preimage = (before_ts + moment + after_ts).replace(
                _PREV_MARK.encode(), prev.encode(), 1
            )
        lines.append(render_line(preimage, signer.sign_b64(preimage), signer.key_id))
        prev = hashlib.sha256(preimage).hexdigest()
    data = b"".join(lines)
    chain = home / "events.jsonl"
    with chain.open("ab") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return len(data)
