"""A gateway key's own figures: its spend in each period, every cap and budget that applies.

What the console's *Me* page, ``GET /v1/ledger/me`` on the gateway and
``ledger statusline`` show a key holder; never another key's data.
"""

import datetime as dt
import fnmatch
import glob
import zoneinfo
from collections.abc import Iterable, Mapping
from typing import Any

from ledger.core.timefmt import format_ts
from ledger.core.units import micros_to_usd


def reporting_zone(config: Any) -> tuple[str, dt.tzinfo]:
    """The zone figures are shown in: ``console.timezone``, else ``usd.day_timezone``."""
    name = config.console.timezone or config.day_timezone
    return name, dt.UTC if name == "UTC" else zoneinfo.ZoneInfo(name)


def period_start(now: dt.datetime, zone: dt.tzinfo, period: str) -> dt.datetime:
    """Where the calendar ``period`` (day, week from Monday, month) containing ``now`` starts."""
    local = now.astimezone(zone)
    day = local.date()
    if period == "week":
        day -= dt.timedelta(days=day.weekday())
    elif period == "month":
        day = day.replace(day=1)
    return dt.datetime.combine(day, dt.time(), zone).astimezone(dt.UTC)


def _money(micros: int | None) -> dict[str, Any]:
    return {"micros": micros, "usd": None if micros is None else micros_to_usd(micros)}


def _applies(budget: Mapping[str, Any], match: Iterable[tuple[str, str]], key: Any) -> bool:
    if budget.get("per_value") not in (None, key.name) and budget.get("per") == "key":
        return False
    values = {"key": key.name, "agent": key.agent or key.name}
    for field, pattern in match:
        if field in values:
            if not fnmatch.fnmatchcase(values[field], pattern):
                return False
        elif field == "tag":
            if not any(fnmatch.fnmatchcase(tag, pattern) for tag in key.tags):
                return False
        else:
            return False  # a budget for some sessions or models only: not all of this key's
    return True


def key_figures(runtime: Any, key: Any) -> dict[str, Any]:
    """A gateway key's own figures: its spend in each period, and what is left of each cap.

    Spend is read from the rollups (the key's cells since the earlier of the
    week's and the month's start), never from the chain.
    """
    from ledger.core.rollups import group
    from ledger.services.views.rollups import cells_between
    from ledger.services.views.status import collect

    now = runtime.clock.now()
    zone_name, zone = reporting_zone(runtime.config)
    periods = {name: period_start(now, zone, name) for name in ("day", "week", "month")}
    _caught, cells = cells_between(runtime, min(periods.values()), None)
    spent = dict.fromkeys(periods, 0)
    calls = 0
    first_days = {
        name: start.astimezone(zone).date().isoformat() for name, start in periods.items()
    }
    for row in group(cells, (), zone, {"key": glob.escape(key.name)}):
        for name, first in first_days.items():
            if row.day >= first:
                spent[name] += row.usd_micros
        calls += row.calls if row.day >= first_days["day"] else 0
    document = collect(runtime)
    matches = {b.name: b.match for b in runtime.config.budgets}
    budgets = [
        b for b in document.get("budgets") or [] if _applies(b, matches.get(b["name"], ()), key)
    ]
    caps = [
        {
            "scope": c["scope"],
            "cap_micros": c["cap_micros"],
            "used_micros": c["usd_used_micros"],
            "remaining_micros": c["usd_remaining_micros"],
            "usage_pct": c["usage_pct"],
            "uncertainty_reason": c["uncertainty_reason"],
        }
        for c in document["usd"]["caps"]
    ]
    return {
        "key": key.name, "agent": key.agent or key.name, "tags": list(key.tags),
        "expires": key.expires, "timezone": zone_name, "now": format_ts(now),
        "spend": {name: _money(value) for name, value in spent.items()},
        "calls_today": calls, "caps": caps, "budgets": budgets,
        "tightest": _tightest(caps, budgets),
    }  # fmt: skip


def _tightest(caps: list[dict[str, Any]], budgets: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cap or budget with the least left, with its reset time."""
    options = [
        {"scope": c["scope"], "remaining_micros": c["remaining_micros"], "resets_at": None}
        for c in caps if c["remaining_micros"] is not None
    ] + [
        {"scope": f"budget:{b['name']}" + (f"[{b['per_value']}]" if b.get("per_value") else ""),
         "remaining_micros": b["cap_micros"] - b["used_micros"] - b["reserved_micros"],
         "resets_at": b.get("period_end")}
        for b in budgets if b.get("used_micros") is not None and b.get("cap_micros") is not None
    ]  # fmt: skip
    return min(options, key=lambda o: o["remaining_micros"]) if options else None
