"""The budget facts at one chain position, for counting a budget added later (SPEC §21).

A state whose budgets changed is at a chain position; the facts must be at
the very same one, or the counters built from them would count entries the
state has not folded, or miss some it has. The rollups are usually near the
head (the daemon, the gateway and ``ledger serve`` keep them current), so
they are caught up to the state's position when they lag it by a few
thousand entries at most, verifying those entries as any catch-up does.
Rollups that are ahead of the state, further behind, kept under another trust
store or of another format are not used: the budgets are folded from the
chain then, as before.
"""

from typing import NamedTuple

from ledger.core.budget_facts import Cell, CellKey, Pending
from ledger.core.trust import trust_fingerprint
from ledger.errors import LedgerError
from ledger.services.ports import Head
from ledger.services.views.rollup_ports import RollupDeps, RollupTx
from ledger.services.views.rollups import ROLLUP_FORMAT, catch_up_in

# Entries the rollups may lag the state by and still be caught up for it: a
# moment's verification, never a fold of the chain from line 1.
MAX_LAG = 5_000
# How long to wait for another writer of the rollups (a follower catching them
# up holds them for a moment; the count runs before the chain lock is taken).
# Beyond that the budgets are folded from the chain instead, which on a long
# month takes far longer.
WAIT_SECONDS = 5.0


class FactsAt(NamedTuple):
    """The budget facts at a position: cells from a slot, live reservations, doubts."""

    cells: list[tuple[CellKey, Cell]]
    pending: list[tuple[str, Pending]]
    doubts: list[int]
    max_ts: str | None


def facts_at(deps: RollupDeps, head: Head, entries: int, from_slot: int) -> FactsAt | None:
    """The facts at ``head`` (``entries`` long) from record slot ``from_slot``, or ``None``.

    ``None`` when the rollups cannot give them at exactly that position (see
    the module's text) or fail a check; never raises for that.
    """
    try:
        with deps.rollups.writing(WAIT_SECONDS) as tx:
            if not _near(deps, tx, head, entries):
                return None
            caught = catch_up_in(deps, tx, fresh=False, until=head)
            position = tx.position()
            if position is None or (caught.entries, caught.head_hash, caught.size) != (
                entries, head.entry_hash, head.size,
            ):  # fmt: skip
                return None
            totals = position.get("facts")
            if not isinstance(totals, dict):
                return None
            cells, pending, doubts = tx.budget_facts.read(from_slot, totals)
            return FactsAt(cells, pending, doubts, totals.get("max_ts"))
    except LedgerError:
        return None


def _near(deps: RollupDeps, tx: RollupTx, head: Head, entries: int) -> bool:
    """Whether the rollups can be brought to ``head`` by folding a few entries."""
    position = tx.position()
    if position is None or position.get("format") != ROLLUP_FORMAT:
        return False
    if position.get("trust") != trust_fingerprint(deps.keys.load_trust()):
        return False
    size, behind = int(position["size"]), entries - int(position["entries"])
    if size == head.size:
        return position.get("head_hash") == head.entry_hash
    return size < head.size and 0 < behind <= MAX_LAG
