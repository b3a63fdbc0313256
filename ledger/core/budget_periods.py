"""The periods budgets are in at one moment, each kind of period worked out once.

A verdict checks many budgets that share a few periods ("day", "month",
"rolling:5h"); their bounds, their keys and the bounds as the chain writes
times are the same for every budget of one period, so each is computed once
per moment, however many budgets there are.
"""

import datetime as dt
import functools

from ledger.core.budget_calendar import period_bounds, period_key
from ledger.core.budgets import Budget
from ledger.core.timefmt import format_ts

# A period's start and end, then both as the chain writes times.
Bounds = tuple[dt.datetime, dt.datetime, str, str]


class PeriodsAt:
    """``period_key`` and ``period_bounds`` at one moment, remembered per period."""

    def __init__(
        self, moment: dt.datetime, zone: dt.tzinfo, moment_text: str | None = None
    ) -> None:
        self.moment = moment
        self.zone = zone
        self._keys: dict[str, str | None] = {}
        self._bounds: dict[int | str, Bounds] = {}
        self._moment_text = moment_text  # ``format_ts(moment)``, when the caller has it

    def key(self, budget: Budget) -> str | None:
        """The name of ``budget``'s calendar period (its local start date); rolling: ``None``."""
        if budget.window_seconds is not None:
            return None
        try:
            return self._keys[budget.period]
        except KeyError:
            key = self._keys[budget.period] = period_key(budget, self.moment, self.zone)
            return key

    def bounds(self, budget: Budget) -> Bounds:
        """The UTC start and end of ``budget``'s period (end excluded), then as text."""
        window = budget.window_seconds
        # A window's bounds depend on its length alone, a calendar period's on its name.
        kind: int | str = window if window is not None else budget.period
        try:
            return self._bounds[kind]
        except KeyError:
            start, end = period_bounds(budget, self.moment, self.zone)
            if window is None:
                found = _calendar_texts(start, end)
            else:  # a window ending at the moment, which every rolling period shares
                if self._moment_text is None:
                    self._moment_text = format_ts(end)
                found = (start, end, format_ts(start), self._moment_text)
            self._bounds[kind] = found
            return found


@functools.lru_cache(maxsize=64)
def _calendar_texts(start: dt.datetime, end: dt.datetime) -> Bounds:
    # A calendar period's bounds are the same all day (all month): written once.
    return start, end, format_ts(start), format_ts(end)
