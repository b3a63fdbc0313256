"""The one place that reads the time."""

import datetime as dt
import os

from ledger.core.timefmt import parse_iso8601
from ledger.errors import ConfigError


class SystemClock:
    """The machine's clock, in UTC."""

    def now(self) -> dt.datetime:
        """The current time, timezone-aware."""
        return dt.datetime.now(dt.UTC)


class FixedClock:
    """A clock that always reads one time (``LEDGER_NOW``, tests, incident replay)."""

    def __init__(self, moment: dt.datetime) -> None:
        self.moment = moment

    def now(self) -> dt.datetime:
        """The fixed time."""
        return self.moment


def clock_from_env(environ: dict[str, str] | None = None) -> SystemClock | FixedClock:
    """``FixedClock`` when ``LEDGER_NOW`` is set, else the system clock.

    Raises:
        ConfigError: ``LEDGER_NOW`` is not an ISO-8601 time with a timezone.
    """
    value = (os.environ if environ is None else environ).get("LEDGER_NOW")
    if not value:
        return SystemClock()
    try:
        return FixedClock(parse_iso8601(value))
    except ValueError as exc:
        raise ConfigError(f"LEDGER_NOW: {exc}") from exc


def monotonic() -> float:
    """Seconds on a clock that never jumps, for timeouts."""
    import time

    return time.monotonic()
