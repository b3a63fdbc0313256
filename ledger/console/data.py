"""Every figure the console shows, read from the home's services and derived state.

The one module of the console that reads data: pages and their JSON twins
call these functions and nothing else, so what a page shows is what
``ledger status``, ``ledger keys list`` and the reports show. Spend comes from
the rollups and calls from the calls table kept with them (SPEC §19), caught
up from their saved position first: no page reads the chain from line 1,
whatever its length.
"""

import datetime as dt
import glob
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from ledger.core.alerts import redacted_url
from ledger.core.rollups import SLOT_SECONDS, group, totals
from ledger.core.timefmt import format_ts, parse_ts
from ledger.core.units import micros_to_usd
from ledger.errors import LedgerError
from ledger.services.views import me as me_view
from ledger.services.views.rollups import cells_between, with_rollups

DIMENSIONS = ("agent", "key", "session", "model", "provider", "tag", "client")
FILTER_KEYS = (*DIMENSIONS, "verdict")
VERDICTS = ("allow", "warn-90", "halt-100", "halt-uncertainty")
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
_VALUE_MAX = 256
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class FilterError(LedgerError):
    """A query parameter the console cannot use (answered 400)."""

    exit_code = 2


class Filters(NamedTuple):
    """The query of a page or JSON endpoint."""

    equal: tuple[tuple[str, str], ...] = ()
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    by: str = "agent"
    cursor: int | None = None
    limit: int = DEFAULT_LIMIT

    def query(self, **changes: str | None) -> dict[str, str]:
        """The filters as query parameters (for links), with ``changes`` applied."""
        params = dict(self.equal)
        if self.start is not None:
            params["from"] = format_ts(self.start)
        if self.end is not None:
            params["to"] = format_ts(self.end)
        params["by"] = self.by
        for key, value in changes.items():
            if value is None:
                params.pop(key, None)
            else:
                params[key] = value
        return params


def _when(text: str, name: str, zone: dt.tzinfo, end: bool) -> dt.datetime:
    """An ISO date (a whole day in the reporting zone) or an ISO time."""
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            day = dt.date.fromisoformat(text)
        except ValueError as exc:
            raise FilterError(f"{name}: {exc}") from exc
        if end:
            day += dt.timedelta(days=1)
        return dt.datetime.combine(day, dt.time(), zone).astimezone(dt.UTC)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise FilterError(f"{name}: must be an ISO date or time, got {text[:40]!r}") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone)
    return when.astimezone(dt.UTC)


def parse_filters(params: Mapping[str, str], zone: dt.tzinfo) -> Filters:
    """The filters of a query string.

    Raises:
        FilterError: an unknown dimension or verdict, a bad time, cursor or limit.
    """
    equal = []
    for key in FILTER_KEYS:
        value = params.get(key)
        if value:
            if len(value) > _VALUE_MAX:
                raise FilterError(f"{key}: at most {_VALUE_MAX} characters")
            if key == "verdict" and value not in VERDICTS:
                raise FilterError(f"verdict: must be one of {', '.join(VERDICTS)}")
            equal.append((key, value))
    by = params.get("by") or "agent"
    if by not in DIMENSIONS:
        raise FilterError(f"by: must be one of {', '.join(DIMENSIONS)}")
    start = _when(params["from"], "from", zone, False) if params.get("from") else None
    end = _when(params["to"], "to", zone, True) if params.get("to") else None
    cursor = limit = None
    try:
        cursor = int(params["cursor"]) if params.get("cursor") else None
        limit = int(params["limit"]) if params.get("limit") else DEFAULT_LIMIT
    except ValueError as exc:
        raise FilterError("cursor and limit: must be whole numbers") from exc
    if not 1 <= limit <= MAX_LIMIT or (cursor is not None and cursor < 0):
        raise FilterError(f"limit: must be in [1, {MAX_LIMIT}]; cursor ≥ 0")
    return Filters(tuple(equal), start, end, by, cursor, limit)


def reporting_zone(runtime: Any) -> tuple[str, dt.tzinfo]:
    """The zone pages print times in: ``console.timezone``, else ``usd.day_timezone``."""
    return me_view.reporting_zone(runtime.config)


def _money(micros: int | None) -> dict[str, Any]:
    return {"micros": micros, "usd": None if micros is None else micros_to_usd(micros)}


def _text(moment: dt.datetime | None) -> str | None:
    return None if moment is None else format_ts(moment)


def call_rows(runtime: Any, filters: Filters) -> dict[str, Any]:
    """One row per call, newest first, ``limit`` of them before ``cursor`` (a line number).

    Read from the calls table kept with the rollups (caught up first): a page
    costs the entries sealed since the last read and one index range.
    """
    equal = dict(filters.equal)
    start, end = _text(filters.start), _text(filters.end)

    def page(tx: Any) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = tx.calls.page(
            equal, start, end, filters.cursor, filters.limit + 1
        )
        return rows

    _caught, rows = with_rollups(runtime, page)
    more = rows[filters.limit - 1]["line"] if len(rows) > filters.limit else None
    return {"calls": rows[: filters.limit], "next_cursor": more, "filters": filters.query()}


_period_start = me_view.period_start


def _on_quarter_hours(*moments: dt.datetime | None) -> bool:
    return all(m is None or not (m - _EPOCH).total_seconds() % SLOT_SECONDS for m in moments)


def _spend_groups(runtime: Any, filters: Filters, zone: dt.tzinfo) -> tuple[list[Any], int]:
    """Groups (value, calls, micros, halts) and the total, from the rollups or the calls table.

    Whole quarter hours without a verdict filter come from the rollups
    (O(quarter hours × groups)); a range cut inside a quarter hour, or a
    verdict filter, from the calls table.
    """
    equal = dict(filters.equal)
    start = filters.start
    if "verdict" not in equal and start is not None and _on_quarter_hours(start, filters.end):
        globs = {name: glob.escape(value) for name, value in equal.items()}
        _caught, cells = cells_between(runtime, start, filters.end)
        rows = group(cells, (filters.by,), zone, globs)
        summed: dict[str, dict[str, Any]] = {}
        for row in rows:
            found = summed.setdefault(
                row.values[0], {"value": row.values[0], "calls": 0, "micros": 0, "halts": 0}
            )
            found["calls"] += row.calls
            found["micros"] += row.usd_micros
            found["halts"] += row.halts
        total = totals(group(cells, (), zone, globs))["usd_micros"]
        return list(summed.values()), total
    first, end = _text(start), _text(filters.end)

    def query(tx: Any) -> tuple[list[Any], int]:
        groups = tx.calls.groups(filters.by, equal, first, end)
        once = tx.calls.groups("agent", equal, first, end)  # each call once, for the total
        return groups, sum(int(g["micros"]) for g in once)

    return with_rollups(runtime, query)[1]


def spend(runtime: Any, filters: Filters) -> dict[str, Any]:
    """Spend grouped by one dimension over the filters' range (default: today)."""
    zone_name, zone = reporting_zone(runtime)
    if filters.start is None and filters.end is None:
        filters = filters._replace(start=_period_start(runtime.clock.now(), zone, "day"))
    if filters.start is None:
        filters = filters._replace(start=_EPOCH)
    groups, total = _spend_groups(runtime, filters, zone)
    ordered = sorted(groups, key=lambda g: (-g["micros"], g["value"]))
    for item in ordered:
        item["usd"] = micros_to_usd(item["micros"])
    now = runtime.clock.now()
    ranges = {
        label: _period_start(now, zone, period).astimezone(zone).date().isoformat()
        for label, period in (("today", "day"), ("this week", "week"), ("this month", "month"))
    }
    return {
        "chart": [(g["value"], g["micros"]) for g in ordered[:20]], "ranges": ranges,
        "by": filters.by, "from": _text(filters.start) if filters.start != _EPOCH else None,
        "to": _text(filters.end), "timezone": zone_name,
        "groups": ordered, "total": _money(total), "filters": filters.query(),
    }  # fmt: skip


def overview(runtime: Any) -> dict[str, Any]:
    """``ledger status --json``'s document, the burn rate, and the chain's health."""
    from ledger.services.views.status import collect

    now = runtime.clock.now()
    since = format_ts(now - dt.timedelta(hours=1))
    caught, burn = with_rollups(runtime, lambda tx: int(tx.calls.recorded_since(since)))
    document = collect(runtime)
    zone_name, zone = reporting_zone(runtime)
    warn = float(runtime.config.warn_pct)
    for cap in document["usd"]["caps"]:
        left = cap.get("usd_remaining_micros")
        resets = _period_start(now, zone, "day") + dt.timedelta(days=1)
        cap["resets_at"] = format_ts(resets)
        cap["state"] = _state(cap, warn)
        # At this rate the cap is reached before it resets, or not this period at all.
        hours = left / burn if burn and left and left > 0 else None
        soon = hours is not None and hours < (resets - now).total_seconds() / 3600
        reached = now + dt.timedelta(hours=hours) if soon and hours is not None else None
        cap["cap_reached_at"] = None if reached is None else format_ts(reached)
    for budget in document.get("budgets") or []:
        budget["state"] = _state(budget, warn)
    from ledger.services.chain.init_options import billing_line

    return {
        "status": document,
        "billing_text": billing_line(document["billing"]),
        "timezone": zone_name,
        "now": format_ts(now),
        "burn_rate_per_hour": _money(burn),
        "chain": chain_health(runtime, caught.entries),
    }


def _state(figures: Mapping[str, Any], warn_pct: float) -> str:
    if figures.get("uncertainty_reason"):
        return f"uncertainty: {figures['uncertainty_reason']}"
    pct = figures.get("usage_pct")
    if pct is None:
        return "allow"
    pct = float(pct)
    return "halt" if pct >= 100 else "warn" if pct >= warn_pct else "allow"  # noqa: PLR2004


def chain_health(runtime: Any, entries: int) -> dict[str, Any]:
    """Entries, head, the remembered finding, the newest checkpoint and snapshot."""
    from ledger.services.chain.findings import stored_finding

    head = runtime.chain.head()
    checkpoint = runtime.newest_checkpoint()
    folder = runtime.snapshots_dir
    snapshots = sorted(p.name for p in folder.glob("*")) if folder.exists() else []
    shown_checkpoint = None
    if checkpoint is not None:
        shown_checkpoint = {
            "entries": checkpoint.entries,
            "head_hash": checkpoint.head_hash,
            "ts_utc": checkpoint.ts_utc,
        }
    return {
        "head_hash": None if head is None else head.entry_hash,
        "head_ts": None if head is None else getattr(head, "ts_utc", None),
        "entries": entries,
        "finding": stored_finding(runtime.states),
        "checkpoint": shown_checkpoint,
        "newest_snapshot": snapshots[-1] if snapshots else None,
    }


def keys(runtime: Any) -> dict[str, Any]:
    """Every gateway and console key as ``keys list`` shows it."""
    from ledger.services.gateway_keys import list_keys

    return {"keys": list_keys(runtime)}


def alerts(runtime: Any) -> dict[str, Any]:
    """The alert rules and their deliveries, webhooks shown as ``scheme://host/…``."""
    import json

    rules = [{"url": redacted_url(r.url), "on": sorted(r.on)} for r in runtime.config.alert_rules]
    try:
        state = json.loads((runtime.home / "alerts-state.json").read_bytes())
    except (OSError, ValueError):
        state = {}
    pending = [
        {
            "url": redacted_url(str(item.get("url", ""))),
            "event": (item.get("body") or {}).get("event"),
            "scope": (item.get("body") or {}).get("scope"),
            "attempts": item.get("attempts"),
            "next_try": item.get("next_try"),
            "state": "failed" if item.get("attempts") else "pending",
        }
        for item in (state.get("pending") or [])
        if isinstance(item, dict)
    ]
    sent = sorted((state.get("sent") or {}).items(), key=lambda kv: str(kv[1]), reverse=True)
    return {
        "rules": rules,
        "deliveries": pending,
        "sent": [{"alert": key, "at": at, "state": "sent"} for key, at in sent[:100]],
    }


def me(runtime: Any, key: Any) -> dict[str, Any]:
    """A gateway key's own figures (as ``GET /v1/ledger/me`` answers them)."""
    from ledger.services.views.me import key_figures

    return key_figures(runtime, key)


def halt_histogram(runtime: Any) -> dict[str, Any]:
    """Halted verdicts per hour over the last 24 hours, oldest hour first."""
    now = runtime.clock.now()
    since = format_ts(now - dt.timedelta(hours=24))
    _caught, times = with_rollups(runtime, lambda tx: list(tx.calls.halt_times(since)))
    counts = [0] * 24
    for when in times:
        age = (now - parse_ts(when)).total_seconds() // 3600
        if 0 <= age < 24:  # noqa: PLR2004
            counts[23 - int(age)] += 1
    return {"halts_per_hour": counts, "now": format_ts(now)}
