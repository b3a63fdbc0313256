"""The lines this process sealed itself, remembered for a while.

A long-lived writer (the gateway, ``ledger serve``, the daemon) also follows
its own chain: its rollup follower folds each batch a moment after it is
durable. Checking the Ed25519 signature of a line this very process has just
signed proves nothing new, yet it was a tenth of the gateway's CPU, taken
from the call path by the interpreter's lock. So the writer remembers a digest
of each line it seals, and a follower that finds exactly those bytes in the
chain checks the line's link and its key's validity but not the Ed25519
signature again. Any other line, and any byte that differs, is checked in
full; ``verify-chain`` checks everything.

A line remembered whose append was then rolled back is harmless: it carries
this process's own valid signature, so a check would pass it anyway.
"""

import hashlib
import threading
from collections import OrderedDict

# Enough for the lines sealed between two folds of a busy gateway (a fold
# every half second), in a few MiB at most.
_KEPT = 16_384
_LINES: "OrderedDict[bytes, None]" = OrderedDict()
_LOCK = threading.Lock()


def _digest(line: bytes) -> bytes:
    return hashlib.sha256(line.rstrip(b"\n")).digest()


def remember(line: bytes) -> None:
    """Note a line this process has just sealed (with or without its newline)."""
    digest = _digest(line)
    with _LOCK:
        _LINES[digest] = None
        while len(_LINES) > _KEPT:
            _LINES.popitem(last=False)


def sealed_here(line: bytes) -> bool:
    """Whether this process sealed exactly this line (with or without its newline)."""
    digest = _digest(line)
    with _LOCK:
        return digest in _LINES


def forget_all() -> None:
    """Forget every line (a test's fresh start)."""
    with _LOCK:
        _LINES.clear()
