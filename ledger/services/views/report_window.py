"""Which part of the chain one budget day's report reads, found through the rollups (SPEC §19).

A budget day's figures depend only on entries sealed near it: the gate's
fold keeps the current and the previous budget day, a reservation lives
``usd.reservation_ttl_seconds``, and a budget counts the period that holds
the day (a rolling window: the window ending at the day's end). So the
report folds from a little before the earliest of those starts (the margin
of ``budget_refold``: the reservation time-to-live twice over plus the clock
tolerance) to the first entry two days after the day, and nothing else.

The rollups are caught up first: everything up to their position has been
verified and held against the newest checkpoint, and their quarter-hour
marks (MAC'd, written as each entry was verified) give the byte position and
the hash linking into the window at both ends. The window's links are checked
again as it is read, from the start mark's hash to the end mark's (its
signatures were checked when the rollups folded it): an edited line changes its
hash and breaks a link, so the report never folds a line other than the one
that was verified. A budget that
never resets depends on every entry: then the day is folded from line 1.
"""

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from ledger.core.budget_calendar import period_bounds
from ledger.core.chain import ChainVerifier
from ledger.core.envelope import GENESIS
from ledger.core.rollups import slot_of
from ledger.core.timefmt import day_bounds
from ledger.errors import ChainBrokenError
from ledger.services.chain.counter import counter_problem
from ledger.services.views.rollup_ports import RollupDeps
from ledger.services.views.rollups import Caught, marks_at

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger.core.config import Config
    from ledger.core.envelope import ParsedEntry
    from ledger.core.trust import TrustStore
    from ledger.services.ports import Clock


class DayReportDeps(RollupDeps, Protocol):
    """A report of one day: the rollups, the chain they point into, the config and the clock."""

    @property
    def config(self) -> "Config":
        """The configuration in force now."""
        ...

    @property
    def clock(self) -> "Clock":
        """The time now."""
        ...


class _Verified:
    """Signatures the rollups already checked (see ``walk_window``)."""

    @staticmethod
    def signature_problem(_parsed: object, *, strict: bool = False, vouched: bool = False) -> None:
        """Nothing to check again."""


_VERIFIED = _Verified()


@dataclass(frozen=True, slots=True)
class Window:
    """Lines ``[start, end)`` of the chain (bytes), the entry numbers and hashes at both ends."""

    caught: Caught
    start: int
    end: int
    entries_before: int
    prev_hash: str | None
    last_hash: str | None


def _since(day: str, zone: dt.tzinfo, config: "Config") -> dt.datetime | None:
    """The earliest moment the day's figures depend on; ``None``: from line 1."""
    before = (dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat()
    start, end = day_bounds(day, zone)
    starts = [day_bounds(before, zone)[0]]
    for budget in config.budgets:
        try:
            starts.append(period_bounds(budget, start, zone)[0])
            starts.append(period_bounds(budget, end, zone)[0])
        except (OverflowError, ValueError):
            return None  # a period that starts before the calendar does (never resets)
    margin = dt.timedelta(
        seconds=2 * config.reservation_ttl_seconds + config.clock_tolerance_seconds
    )
    try:
        return min(starts) - margin
    except OverflowError:
        return None


def day_window(deps: RollupDeps, day: str, zone: dt.tzinfo, config: "Config") -> Window:
    """The part of the chain budget day ``day``'s report folds (the rollups caught up first).

    Raises:
        ChainBrokenError: the entries after the rollups' position do not verify.
        CheckpointDisagreesError: the chain is cut or differs from its newest checkpoint.
        ChainIOError: the chain or the rollups cannot be read.
    """
    after = (dt.date.fromisoformat(day) + dt.timedelta(days=2)).isoformat()
    # The report holds the day until the first entry two days later (see report.py).
    held_until = day_bounds(after, zone)[0] + dt.timedelta(seconds=config.clock_tolerance_seconds)
    since = _since(day, zone, config)
    start_slot = None if since is None else slot_of(since)
    caught, first, last = marks_at(deps, start_slot, slot_of(held_until) + 1)
    if since is None:
        first = [0, 0, None]  # from line 1
    elif first is None:
        # No entry that late: an empty window at the rollups' position.
        first = [caught.entries, caught.size, caught.head_hash]
    if last is None:
        last = [caught.entries, caught.size, caught.head_hash]
    if int(last[1]) < int(first[1]):
        last = first
    return Window(caught, int(first[1]), int(last[1]), int(first[0]), first[2], last[2])


def walk_window(
    deps: DayReportDeps,
    walk: "Callable[[ParsedEntry], None]",
    day: str,
    zone: dt.tzinfo,
    config: "Config",
) -> tuple[int, str | None]:
    """Verify and fold the day's part of the chain; the chain's entries and the gate's problem.

    Whether the counter can be trusted is a property of the whole chain: the
    gate's own counter says (its saved state, caught up to the head).
    """
    from ledger.services.chain.state import load_counter

    window = day_window(deps, day, zone, config)
    # Every entry here was verified, signature and all, when the rollups folded
    # it; the marks at both ends (MAC'd) hold the hashes it links from and to,
    # so checking the links again is enough: an edited line changes its hash,
    # and no line in between can be made to link to the end's hash again.
    verifier = ChainVerifier(
        cast("TrustStore", _VERIFIED),
        expected_prev=window.prev_hash or GENESIS,
        first_line=window.entries_before + 1,
        on_entry=walk,
    )
    lines = deps.chain.iter_lines(window.start, window.end) if window.end > window.start else ()
    for raw in lines:
        if not verifier.feed(raw):
            break
    report = verifier.report()
    if not report.ok:
        raise ChainBrokenError(report.line or 0, report.reason or "does not verify")
    if report.entries and report.head_hash != window.last_hash:
        raise ChainBrokenError(
            window.entries_before + report.entries, "differs from the entry the rollups verified"
        )
    with deps.chain.read_transaction() as tx:
        counter = load_counter(tx, deps)
    return window.caught.entries, counter_problem(counter, config)
