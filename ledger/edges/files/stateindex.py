"""How the derived state goes with its index: which save the index answers for, what leaves it.

Used by ``ledger.edges.files.statefile`` on load (``knows``), on a save of the
state (``drop_old_epochs``) and on a save of keys (``cutoff``, ``position``).
"""

import datetime as dt
from typing import Any

from ledger.edges.files.indexdb import IndexDb, IndexTx, Position
from ledger.edges.files.storedcounters import StoredCounters
from ledger.errors import StateMismatchError


def knows(index: IndexDb, seq: int) -> bool:
    """Whether the index can answer for the state saved with it at ``seq``."""
    try:
        newest, floor = index.meta()
    except StateMismatchError:
        return False
    return floor <= seq <= newest


def position(record: dict[str, Any]) -> Position:
    """Where the entry of a held key or ref record is in the chain."""
    return Position(int(record.get("segment") or 0), int(record["entry"]), record.get("offset"))


def cutoff(records: list[dict[str, Any]], days: int) -> str | None:
    """Keys sealed before this time leave the hot index (``None``: no time to go by).

    Counted back from the newest entry saved, so it follows the chain's own
    clock (``LEDGER_NOW`` included), never the reader's.
    """
    from ledger.core.timefmt import format_ts, parse_ts

    newest = max((str(r["ts"]) for r in records if r.get("ts")), default=None)
    if newest is None:
        return None
    return format_ts(parse_ts(newest) - dt.timedelta(days=days))


def drop_old_epochs(tx: IndexTx, data: dict[str, Any]) -> None:
    """Forget counters two epochs old: neither this state nor the one it follows reads them."""
    for name, table in (data.get("budgets") or {}).get("by_name", {}).items():
        epoch = int(table.get("epoch", 0))
        if epoch >= 2 and isinstance(table.get("values"), StoredCounters):  # noqa: PLR2004
            tx.drop_epochs_before(name, epoch - 1)
