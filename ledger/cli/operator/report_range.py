"""``ledger report --month|--from/--to [--by K]... [--format F]``: spend over a range of days.

Drawn from the rollups (``ledger.services.views.rollups``): one row per budget
day and group, as a table, JSON, CSV (one row per group and day) or a
self-contained HTML page.
"""

import calendar
import csv
import datetime as dt
import io
import re
from typing import Any

from ledger.cli.output import text_table
from ledger.errors import UsageError

FORMATS = ("table", "json", "csv", "html")
CSV_MEASURES = (
    "calls",
    "usd",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "halts",
)
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_FIRST_DAY, _LAST_DAY = dt.date(1, 1, 2), dt.date(9999, 12, 29)
_MONTH = re.compile(r"\d{4}-\d{2}")
_DECEMBER = 12


def parse_day(text: str) -> str:
    """A ``--day`` value as ``YYYY-MM-DD``.

    Raises:
        UsageError: not a calendar day in that form.
    """
    try:
        if not _DAY.fullmatch(text):
            raise ValueError(text)
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--day: {text!r} is not a day (YYYY-MM-DD)") from None
    if not _FIRST_DAY <= day <= _LAST_DAY:  # the day after must still be in the calendar
        raise UsageError(f"--day: {text!r} is outside {_FIRST_DAY} to {_LAST_DAY}")
    return day.isoformat()


def parse_month(text: str) -> tuple[str, str]:
    """A ``--month YYYY-MM`` as its first and last day.

    Raises:
        UsageError: not a month in that form.
    """
    if not _MONTH.fullmatch(text) or not 1 <= int(text[5:]) <= _DECEMBER or text[:4] == "0000":
        raise UsageError(f"--month: {text!r} is not a month (YYYY-MM)")
    year, month = int(text[:4]), int(text[5:])
    if (year, month) in {(1, 1), (9999, 12)}:
        raise UsageError(f"--month: {text!r} is outside the calendar ledger can count in")
    last = calendar.monthrange(year, month)[1]
    return f"{text}-01", f"{text}-{last:02d}"


def parse_zone(text: str) -> dt.tzinfo:
    """A ``--tz`` IANA zone name.

    Raises:
        UsageError: not a known zone.
    """
    import zoneinfo

    if text == "UTC":
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise UsageError(f"--tz: {text!r} is not a known IANA time zone") from None


def parse_format(text: str) -> str:
    """A ``--format`` value.

    Raises:
        UsageError: not one of ``FORMATS``.
    """
    if text not in FORMATS:
        raise UsageError(f"--format: {text!r} is not one of {', '.join(FORMATS)}")
    return text


def day_range(
    day: str | None, month: str | None, first: str | None, last: str | None,
    runtime: Any, zone: dt.tzinfo | None,
) -> tuple[str, str]:  # fmt: skip
    """The first and last budget day asked for (default: today).

    Raises:
        UsageError: more than one way of giving the range, or half of --from/--to.
    """
    from ledger.core.timefmt import budget_day

    given = [name for name, value in (("--day", day), ("--month", month)) if value is not None]
    if first is not None or last is not None:
        given.append("--from/--to")
    if len(given) > 1:
        raise UsageError(f"give one of {', '.join(given)}")
    if month is not None:
        return parse_month(month)
    if first is not None or last is not None:
        if first is None or last is None:
            raise UsageError("--from and --to go together")
        return bound("--from", first), bound("--to", last)
    if day is not None:
        wanted = parse_day(day)
        return wanted, wanted
    today = budget_day(runtime.clock.now(), zone or runtime.config.day_zone)
    return today, today


def bound(option: str, text: str) -> str:
    """A ``--from``/``--to`` day as ``YYYY-MM-DD``.

    Raises:
        UsageError: not a day in that form.
    """
    try:
        return parse_day(text)
    except UsageError:
        raise UsageError(f"{option}: {text!r} is not a day (YYYY-MM-DD)") from None


def document(result: Any, zone_name: str) -> dict[str, Any]:
    """The JSON form of a ``SpendResult``."""
    from ledger.core.rollups import usd6

    by = result.by
    sums = result.total
    return {
        "from": result.first_day,
        "to": result.last_day,
        "timezone": zone_name,
        "by": list(by),
        "entries": result.caught.entries,
        "head_hash": result.caught.head_hash,
        "rows": [row.to_document(by) for row in result.rows],
        "totals": {**sums, "usd": usd6(sums["usd_micros"])},
        "notes": result.notes,
    }


def render_csv(doc: dict[str, Any]) -> str:
    """One row per group and day: ``day, <dimensions…>, calls, usd, tokens…, halts``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["day", *doc["by"], *CSV_MEASURES])
    for row in doc["rows"]:
        writer.writerow([row["day"], *(row[name] for name in doc["by"]), *(
            row[name] for name in CSV_MEASURES)])  # fmt: skip
    return out.getvalue()


def render_table(doc: dict[str, Any]) -> str:
    """The rows as a table for people, with a total line."""
    by = doc["by"]
    head = (
        f"Spend from {doc['from']} to {doc['to']} ({doc['timezone']}); "
        f"{doc['entries']} chain entries verified"
    )
    header = ["DAY", *(name.upper() for name in by), "CALLS", "USD", "INPUT", "OUTPUT",
              "CACHE READ", "CACHE WRITE", "HALTS"]  # fmt: skip

    def cells(row: dict[str, Any], first: str, values: list[str]) -> list[str]:
        return [first, *values, str(row["calls"]), row["usd"], str(row["input_tokens"]),
                str(row["output_tokens"]), str(row["cache_read_tokens"]),
                str(row["cache_write_tokens"]), str(row["halts"])]  # fmt: skip

    rows = [header]
    rows += [cells(row, row["day"], [row[name] or "(none)" for name in by]) for row in doc["rows"]]
    rows.append(cells(doc["totals"], "TOTAL", [""] * len(by)))
    lines = [head, *[f"note: {note}" for note in doc["notes"]], "", *text_table(rows)]
    if "tag" in by:
        lines.append("  (a call with several tags counts under each: totals by tag may exceed it)")
    return "\n".join(lines) + "\n"


def page_scopes(runtime: Any, start: str, end: str, zone: dt.tzinfo | None) -> dict[str, Any]:
    """Every day of the range and each capped scope's spend per day, for the page's chart."""
    from ledger.services.views.rollups import spend

    first, last = dt.date.fromisoformat(start), dt.date.fromisoformat(end)
    days = [(first + dt.timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]
    scopes: dict[str, dict[str, int]] = {"aggregate": {}}
    for row in spend(runtime, start, end, ["provider"], tz=zone).rows:
        aggregate = scopes["aggregate"]
        aggregate[row.day] = aggregate.get(row.day, 0) + row.usd_micros
        scopes.setdefault(f"provider:{row.values[0]}", {})[row.day] = row.usd_micros
    for budget in runtime.config.budgets:
        if budget.per is None and budget.window_seconds is None:
            rows = spend(runtime, start, end, (), dict(budget.match), tz=zone).rows
            scopes[f"budget:{budget.name}"] = {row.day: row.usd_micros for row in rows}
    return {"days": days, "scopes": scopes}


def render_page(doc: dict[str, Any], config: Any) -> str:
    """The range as a self-contained HTML page (needs the report extra for its chart)."""
    try:
        from ledger.integrations.report_range_html import range_page
    except ImportError as exc:
        from ledger.errors import LedgerError

        raise LedgerError(
            "report --format html needs matplotlib: pip install 'spend-ledger[report]'"
        ) from exc
    return range_page(doc, config)
