"""Wall-clock countdown budgets (seed 002): four urgency tiers.

Remaining time is counted in whole seconds, rounded down (0.9 s left is 0 s:
expired). The tiers, with ``r`` the remaining seconds:

============  ==========================  =================================================
tier          when                        message
============  ==========================  =================================================
continue      ``r > 300`` (over 5 min)    ``BUDGET: Xm remaining``
wrap_up       ``120 <= r <= 300``         ``▲ BUDGET: Xm — wrap up and commit soon``
commit_now    ``0 < r < 120``             ``▲▲▲ BUDGET: Xm — STOP EDITING, COMMIT NOW, EXIT ▲▲▲``
expired       ``r <= 0``                  ``▲▲▲ BUDGET EXPIRED — COMMIT NOW AND EXIT ▲▲▲``
============  ==========================  =================================================

``Xm`` is written as whole minutes and the leftover seconds: ``20m``, ``3m12s``,
``2m``, ``45s`` (seconds shown only when not zero, minutes only when not zero).

The deadline comes from ``LEDGER_BUDGET_END`` (Unix seconds, as seed 002's
engine sets ``AUTORESEARCH_BUDGET_END``) when it is set, else from the newest
``ledger time start``: the variable is set per agent process and is the more
specific of the two, so it wins.
"""

import datetime as dt
import re
from decimal import Decimal
from enum import StrEnum
from typing import Any, NamedTuple

from ledger.core.timefmt import format_ts, parse_ts

WRAP_UP_SECONDS = 300
COMMIT_NOW_SECONDS = 120
BUDGET_END_VARIABLE = "LEDGER_BUDGET_END"
_UNIX_RE = re.compile(r"\s*[0-9]{1,12}(\.[0-9]{1,9})?\s*")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class Tier(StrEnum):
    """Seed 002's urgency tiers, calmest first."""

    CONTINUE = "continue"
    WRAP_UP = "wrap_up"
    COMMIT_NOW = "commit_now"
    EXPIRED = "expired"


def remaining_seconds(deadline: dt.datetime, now: dt.datetime) -> int:
    """Whole seconds from ``now`` to ``deadline``, rounded down (negative when past)."""
    delta = deadline - now
    # timedelta keeps 0 <= seconds < 86400 and 0 <= microseconds: this is the floor.
    return delta.days * 86_400 + delta.seconds


def tier(remaining: int) -> Tier:
    """The urgency tier of ``remaining`` whole seconds."""
    if remaining <= 0:
        return Tier.EXPIRED
    if remaining < COMMIT_NOW_SECONDS:
        return Tier.COMMIT_NOW
    if remaining <= WRAP_UP_SECONDS:
        return Tier.WRAP_UP
    return Tier.CONTINUE


def format_remaining(remaining: int) -> str:
    """``20m``, ``3m12s``, ``45s``; ``0s`` for none left."""
    seconds = max(0, remaining)
    minutes, rest = divmod(seconds, 60)
    if minutes and rest:
        return f"{minutes}m{rest}s"
    if minutes:
        return f"{minutes}m"
    return f"{rest}s"


def countdown_message(remaining: int) -> str:
    """Seed 002's message for ``remaining`` whole seconds."""
    level = tier(remaining)
    left = format_remaining(remaining)
    if level is Tier.EXPIRED:
        return "▲▲▲ BUDGET EXPIRED — COMMIT NOW AND EXIT ▲▲▲"
    if level is Tier.COMMIT_NOW:
        return f"▲▲▲ BUDGET: {left} — STOP EDITING, COMMIT NOW, EXIT ▲▲▲"
    if level is Tier.WRAP_UP:
        return f"▲ BUDGET: {left} — wrap up and commit soon"
    return f"BUDGET: {left} remaining"


def parse_budget_end(text: str) -> dt.datetime:
    """``LEDGER_BUDGET_END``: Unix seconds (an integer, or with a decimal fraction).

    Raises:
        ValueError: not a non-negative decimal number of seconds.
    """
    if not _UNIX_RE.fullmatch(text):
        raise ValueError(f"{BUDGET_END_VARIABLE}: not Unix seconds: {text!r}")
    micros = int(Decimal(text.strip()) * 1_000_000)
    try:
        return _EPOCH + dt.timedelta(microseconds=micros)
    except OverflowError as exc:
        raise ValueError(f"{BUDGET_END_VARIABLE}: out of range: {text!r}") from exc


def unix_seconds(moment: dt.datetime) -> int:
    """Whole Unix seconds of ``moment`` (rounded down)."""
    return remaining_seconds(moment, _EPOCH)


class Countdown(NamedTuple):
    """A deadline seen at one moment."""

    deadline: dt.datetime
    source: str
    now: dt.datetime
    budget_seconds: int | None = None

    @property
    def remaining(self) -> int:
        """Whole seconds left (negative when past)."""
        return remaining_seconds(self.deadline, self.now)

    @property
    def tier(self) -> Tier:
        """The urgency tier."""
        return tier(self.remaining)

    @property
    def message(self) -> str:
        """Seed 002's line."""
        return countdown_message(self.remaining)

    def as_json(self) -> dict[str, Any]:
        """The countdown as printed by ``time status``."""
        return {
            "active": True,
            "source": self.source,
            "deadline": format_ts(self.deadline),
            "deadline_unix": unix_seconds(self.deadline),
            "budget_seconds": self.budget_seconds,
            "remaining_seconds": max(0, self.remaining),
            "remaining": format_remaining(self.remaining),
            "expired": self.tier is Tier.EXPIRED,
            "tier": self.tier.value,
            "message": self.message,
        }


def countdown_from(
    agents: dict[str, Any], budget_end: dt.datetime | None, now: dt.datetime
) -> Countdown | None:
    """The countdown in force: ``LEDGER_BUDGET_END`` wins over ``time start``."""
    if budget_end is not None:
        return Countdown(budget_end, "env", now)
    started = agents.get("time")
    if not isinstance(started, dict):
        return None
    return Countdown(parse_ts(started["deadline"]), "start", now, started.get("budget_seconds"))


def no_countdown() -> dict[str, Any]:
    """``time status`` when no deadline is set (advisory: nothing to warn about)."""
    return {
        "active": False,
        "source": None,
        "message": (
            f"no time budget applies: set {BUDGET_END_VARIABLE} (Unix seconds) "
            "or run `ledger time start`"
        ),
    }
