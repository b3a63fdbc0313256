"""Finding where in the chain a moment begins, by bisecting on ``ts_utc``.

A chain this product wrote never goes back in time by more than the clock
tolerance, so a caller asks for a moment that much earlier than it needs and
filters what it reads by time.
"""

from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.services.ports import ChainStore

# Below this many bytes between the bisection's bounds, folding is cheaper than probing.
_CLOSE_ENOUGH = 64 << 10


def bisect_time(store: ChainStore, size: int, since: str) -> int:
    """A position at or before the first line sealed at ``since`` or later."""
    low, high = 0, size
    while high - low > _CLOSE_ENOUGH:
        middle = (low + high) // 2
        found = _time_after(store, middle, size)
        if found is None or found >= since:
            high = middle
        else:
            low = middle
    return low


def _time_after(store: ChainStore, position: int, size: int) -> str | None:
    """The ``ts_utc`` of the first whole line after ``position``, or ``None``."""
    lines = store.iter_lines(position, size)
    next(lines, None)
    for raw in lines:
        try:
            return parse_line(raw.rstrip(b"\n")).ts_utc
        except EnvelopeFormatError:
            return None
    return None
