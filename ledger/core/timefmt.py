"""The one timestamp format of the chain: ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (SPEC §2)."""

import datetime as dt
import re

_TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")

# The chain's format holds the years 0001 to 9999 (SPEC §2), and so does
# ``datetime``. A step works up to two days either side of its clock (the
# budget day before, a day's end), so a clock closer than that to either end
# is "a clock outside what the chain can hold" (SPEC §3, ``verdict``).
CLOCK_MARGIN = dt.timedelta(days=2)
EARLIEST_CLOCK = dt.datetime.min.replace(tzinfo=dt.UTC) + CLOCK_MARGIN
LATEST_CLOCK = dt.datetime.max.replace(tzinfo=dt.UTC) - CLOCK_MARGIN


def clock_in_range(moment: dt.datetime) -> bool:
    """Whether an aware ``moment`` is a clock reading the chain can work with."""
    return EARLIEST_CLOCK <= moment <= LATEST_CLOCK


def format_ts(moment: dt.datetime) -> str:
    """Render an aware datetime in the chain's UTC format.

    Raises:
        ValueError: ``moment`` is naive (a naive time is ambiguous in an audit log).
        OverflowError: ``moment`` falls outside the years 0001–9999 in UTC.
    """
    if moment.tzinfo is None:
        raise ValueError("naive datetime: timestamps must be timezone-aware")
    # isoformat pads the year to four digits; strftime's %Y does not on every
    # platform (glibc writes the year 1 as "1").
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def parse_ts(text: object) -> dt.datetime:
    """Parse the chain's exact format into an aware UTC datetime.

    Raises:
        ValueError: ``text`` is not in the chain's format.
    """
    if not isinstance(text, str) or not _TS_RE.fullmatch(text):
        raise ValueError(f"timestamp not in YYYY-MM-DDTHH:MM:SS.ffffffZ form: {text!r}")
    # fromisoformat accepts "Z" from 3.11 on and is much cheaper than strptime.
    return dt.datetime.fromisoformat(text)


def parse_iso8601(text: str) -> dt.datetime:
    """Parse any ISO-8601 time with an offset or ``Z`` (observer output, ``--end``).

    Raises:
        ValueError: unparseable, without a timezone, or outside the years
            0001–9999 once converted to UTC.
    """
    if not isinstance(text, str):
        raise ValueError(f"not a timestamp: {text!r}")
    moment = dt.datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        raise ValueError(f"timestamp has no timezone: {text!r}")
    try:
        return moment.astimezone(dt.UTC)
    except OverflowError as exc:
        raise ValueError(f"timestamp is outside the years 0001-9999 in UTC: {text!r}") from exc


def utc_day(moment: dt.datetime) -> str:
    """The UTC calendar day of ``moment``, ``YYYY-MM-DD``."""
    return moment.astimezone(dt.UTC).date().isoformat()


def budget_day(moment: dt.datetime, zone: dt.tzinfo) -> str:
    """The budget day of ``moment``: its calendar day in ``zone``, ``YYYY-MM-DD``."""
    return moment.astimezone(zone).date().isoformat()


def day_bounds(day: str, zone: dt.tzinfo) -> tuple[dt.datetime, dt.datetime]:
    """When the budget day ``day`` begins and ends in ``zone``, as UTC times.

    The day runs from its midnight to the next in ``zone``, so a day on which
    the clocks change lasts 23 or 25 hours. A midnight that the change skips
    begins the day at the first moment that exists.

    Raises:
        ValueError: ``day`` is not ``YYYY-MM-DD``.
    """
    date = dt.date.fromisoformat(day)
    start = dt.datetime.combine(date, dt.time(), tzinfo=zone).astimezone(dt.UTC)
    following = date + dt.timedelta(days=1)
    end = dt.datetime.combine(following, dt.time(), tzinfo=zone).astimezone(dt.UTC)
    return start, end
