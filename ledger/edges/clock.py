"""The one place that reads the time."""

import datetime as dt
import os

from ledger.core.timefmt import (
    EARLIEST_CLOCK,
    LATEST_CLOCK,
    clock_in_range,
    format_ts,
    parse_iso8601,
)
from ledger.errors import ClockRangeError, ConfigError


class SystemClock:
    """The machine's clock, in UTC."""

    def now(self) -> dt.datetime:
        """The current time, timezone-aware."""
        return dt.datetime.now(dt.UTC)


class FixedClock:
    """A clock that always reads one time (``LEDGER_NOW``, tests, incident replay)."""

    def __init__(self, moment: dt.datetime, text: str | None = None) -> None:
        self.moment = moment
        self.text = text

    def now(self) -> dt.datetime:
        """The fixed time.

        Raises:
            ClockRangeError: it is too close to the first or last time the
                chain can hold for a step's date arithmetic.
        """
        if not clock_in_range(self.moment):
            raise ClockRangeError(
                f"LEDGER_NOW: {self.text or format_ts(self.moment)} is outside what the chain "
                "can hold "
                f"({format_ts(EARLIEST_CLOCK)} to {format_ts(LATEST_CLOCK)})",
                self.moment,
            )
        return self.moment


def clock_from_env(environ: dict[str, str] | None = None) -> SystemClock | FixedClock:
    """``FixedClock`` when ``LEDGER_NOW`` is set, else the system clock.

    A time past either end of the years 0001–9999 once in UTC (``9999-12-31T23:00
    -05:00``) is a clock outside what the chain can hold, not a malformed one:
    the clock is pinned to that end, and reading it raises ``ClockRangeError``.

    Raises:
        ConfigError: ``LEDGER_NOW`` is not an ISO-8601 time with a timezone.
    """
    value = (os.environ if environ is None else environ).get("LEDGER_NOW")
    if not value:
        return SystemClock()
    try:
        return FixedClock(parse_iso8601(value))
    except ValueError as exc:
        beyond = _beyond_utc_range(value)
        if beyond is not None:
            return FixedClock(beyond, value.strip())
        raise ConfigError(f"LEDGER_NOW: {exc}") from exc


def _beyond_utc_range(text: str) -> dt.datetime | None:
    """The end of the UTC range a valid time with an offset falls beyond, if it does."""
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    offset = moment.utcoffset()
    if offset is None:
        return None
    # A negative offset puts the UTC time later than the local one.
    if offset < dt.timedelta(0):
        return dt.datetime.max.replace(tzinfo=dt.UTC)
    return dt.datetime.min.replace(tzinfo=dt.UTC)


def monotonic() -> float:
    """Seconds on a clock that never jumps, for timeouts."""
    import time

    return time.monotonic()
