"""Where a budget's current period starts and ends, as pure functions of time.

Calendar periods (day, week from Monday, month) run from local midnight in
``usd.day_timezone``, so a DST change day is 23 or 25 hours long; a rolling
window of N hours or days ends now.
"""

import datetime as dt
import functools

from ledger.core.budgets import TOTAL_PERIOD, Budget

_TOTAL_START = dt.date(1970, 1, 1)
_TOTAL_END = dt.date(9999, 12, 30)  # local midnight stays within the years a timestamp holds


def _local_midnight(day: dt.date, zone: dt.tzinfo) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(0), tzinfo=zone).astimezone(dt.UTC)


def calendar_start_day(period: str, moment: dt.datetime, zone: dt.tzinfo) -> dt.date:
    """The local date a calendar period containing ``moment`` starts on."""
    return _start_day(period, moment.astimezone(zone).date())


def _start_day(period: str, local: dt.date) -> dt.date:
    if period == TOTAL_PERIOD:
        return _TOTAL_START
    if period == "week":
        return local - dt.timedelta(days=local.weekday())
    if period == "month":
        return local.replace(day=1)
    return local


def _next_start_day(period: str, start: dt.date) -> dt.date:
    if period == TOTAL_PERIOD:
        return _TOTAL_END
    if period == "week":
        return start + dt.timedelta(days=7)
    if period == "month":
        return (start.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    return start + dt.timedelta(days=1)


def bounds_for_people(period: str, start: str, end: str) -> tuple[str, str]:
    """A period's FROM and TO columns: minutes in UTC, or words for a budget that never resets."""
    if period == TOTAL_PERIOD:
        return "(all time)", "(never resets)"
    return start[:16] + "Z", end[:16] + "Z"


def period_bounds(
    budget: Budget, moment: dt.datetime, zone: dt.tzinfo
) -> tuple[dt.datetime, dt.datetime]:
    """The UTC start and end of the budget's period at ``moment`` (end excluded).

    A rolling window is ``(moment - N, moment]``.
    """
    window = budget.window_seconds
    if window is not None:
        return moment - dt.timedelta(seconds=window), moment
    return _calendar_bounds(budget.period, moment.astimezone(zone).date(), zone)


@functools.lru_cache(maxsize=64)
def _calendar_bounds(
    period: str, local_day: dt.date, zone: dt.tzinfo
) -> tuple[dt.datetime, dt.datetime]:
    # Every verdict asks for the same few periods: the zone arithmetic is done once a day.
    start = _start_day(period, local_day)
    end = _next_start_day(period, start)
    return _local_midnight(start, zone), _local_midnight(end, zone)


def start_key(budget: Budget, moment: dt.datetime, zone: dt.tzinfo) -> str:
    """A calendar budget's period key at ``moment`` (see ``period_key``)."""
    return _start_day(budget.period, moment.astimezone(zone).date()).isoformat()


def period_key(budget: Budget, moment: dt.datetime, zone: dt.tzinfo) -> str | None:
    """The name of the calendar period at ``moment`` (its local start date); rolling: ``None``."""
    if budget.window_seconds is not None:
        return None
    return calendar_start_day(budget.period, moment, zone).isoformat()
