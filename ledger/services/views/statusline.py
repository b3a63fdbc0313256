"""``ledger statusline``: one line for Claude Code's status line.

The session's spend as the ledger recorded it (never the client's own cost
figure), what is left of the tightest cap or budget that applies to the
session, and when that one resets, in the reporting zone.
"""

import datetime as dt
import json
import zoneinfo
from collections.abc import Callable
from typing import Any

from ledger.core.ids import printable
from ledger.core.key_figures import key_status_line
from ledger.core.timefmt import parse_ts
from ledger.core.units import cents_text
from ledger.errors import LedgerError
from ledger.services.views.me import period_start, reporting_zone
from ledger.services.views.status import collect


def session_of(status_json: str) -> str | None:
    """The ``session_id`` of Claude Code's status JSON, or ``None``."""
    try:
        document = json.loads(status_json)
    except (ValueError, RecursionError):
        return None
    session = document.get("session_id") if isinstance(document, dict) else None
    return session if isinstance(session, str) and 0 < len(session) <= 128 else None  # noqa: PLR2004


def session_spend(chain: Any, session: str) -> int:
    """Micro-USD recorded for ``session`` (its records' ``cycle_id``)."""
    needle = json.dumps(session, ensure_ascii=False).encode()
    total = 0
    if not chain.exists():
        return 0
    for line in chain.iter_lines(0):
        if b'"budget.record_call"' not in line or needle not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        payload = entry.get("payload") if isinstance(entry, dict) else None
        if isinstance(payload, dict) and payload.get("cycle_id") == session:
            total += int(payload.get("actual_micros") or 0)
    return total


def _reset_text(when: dt.datetime, zone: dt.tzinfo, zone_name: str, now: dt.datetime) -> str:
    """``resets 00:00 UTC`` within a day, else with the date."""
    local = when.astimezone(zone)
    soon = when - now <= dt.timedelta(days=1)
    return f"resets {local.strftime('%H:%M' if soon else '%Y-%m-%d %H:%M')} {zone_name}"


def status_line(runtime: Any, session: str | None) -> str:
    """The line: session spend, what is left of the tightest scope, its reset."""
    document = collect(runtime)
    usd = document["usd"]
    now = runtime.clock.now()
    zone_name, zone = reporting_zone(runtime.config)
    if not usd.get("figures_known", True):
        return f"ledger · spend unknown: {usd.get('uncertainty_reason') or 'counter untrusted'}"
    parts = ["ledger"]
    if session is not None:
        parts.append(f"session {cents_text(session_spend(runtime.chain, session))}")
    resets = period_start(now, zone, "day") + dt.timedelta(days=1)
    options = [
        (cap["usd_remaining_micros"], cap["scope"], resets)
        for cap in usd["caps"]
        if cap.get("usd_remaining_micros") is not None
    ]
    for budget in document.get("budgets") or []:
        per, value = budget.get("per"), budget.get("per_value")
        if per not in (None, "session") or (per == "session" and value != session):
            continue
        if budget.get("used_micros") is None:
            continue
        left = budget["cap_micros"] - budget["used_micros"] - budget["reserved_micros"]
        name = f"budget:{budget['name']}" + (f"[{value}]" if value else "")
        options.append((left, name, parse_ts(budget["period_end"])))
    if not options:
        parts.append("no cap configured")
        return " · ".join(parts)
    left, scope, when = min(options, key=lambda option: option[0])
    parts.append(f"{cents_text(max(left, 0), round_down=True)} left of {printable(scope)}")
    parts.append(_reset_text(when, zone, zone_name, now))
    return " · ".join(parts)


def laptop_status_line(
    ask: Callable[[str], dict[str, Any]], key_env: str, secret: str | None
) -> str:
    """The line on a machine without a home: the gateway's figures for the key in ``$key_env``.

    Never a made-up figure: a missing key or a gateway that cannot be asked
    says so instead.
    """
    if secret is None:
        return f"ledger · no gateway key: {key_env} is not set"
    try:
        document = ask(secret)
    except LedgerError as exc:
        return f"ledger · spend unknown: {printable(str(exc))}"
    zone_name = str(document.get("timezone") or "UTC")
    try:
        zone: dt.tzinfo = dt.UTC if zone_name == "UTC" else zoneinfo.ZoneInfo(zone_name)
        now = parse_ts(str(document.get("now")))
        tightest = document.get("tightest") or {}
        resets_at = tightest.get("resets_at") if isinstance(tightest, dict) else None
        day_end = period_start(now, zone, "day") + dt.timedelta(days=1)
        when = parse_ts(resets_at) if resets_at else day_end
        resets: str | None = _reset_text(when, zone, zone_name, now)
    except (ValueError, TypeError, zoneinfo.ZoneInfoNotFoundError):
        resets = None
    return key_status_line(document, resets)
