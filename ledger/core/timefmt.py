"""The one timestamp format of the chain: ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (SPEC §2)."""

import datetime as dt
import re

_TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")


def format_ts(moment: dt.datetime) -> str:
    """Render an aware datetime in the chain's UTC format.

    Raises:
        ValueError: ``moment`` is naive (a naive time is ambiguous in an audit log).
    """
    if moment.tzinfo is None:
        raise ValueError("naive datetime: timestamps must be timezone-aware")
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
        ValueError: unparseable, or without a timezone.
    """
    if not isinstance(text, str):
        raise ValueError(f"not a timestamp: {text!r}")
    moment = dt.datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        raise ValueError(f"timestamp has no timezone: {text!r}")
    return moment.astimezone(dt.UTC)


def utc_day(moment: dt.datetime) -> str:
    """The UTC calendar day of ``moment``, ``YYYY-MM-DD``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d")
