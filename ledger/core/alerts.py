"""Alerts: which chain entries put a scope into a state an operator should hear about.

Pure functions over parsed entries. The daemon follows the chain and asks, for
each new entry, whether it is an alert; an alert is sent once per
``(event, scope, period)`` key, so a gate that halts a hundred calls in one
budget day produces one ``halt`` message for that day, and the next day's first
halt produces another.
"""

import datetime as dt
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

from ledger.core.hook_protocol import remedy_in
from ledger.core.ids import for_chat
from ledger.core.timefmt import parse_ts
from ledger.core.units import usd_text
from ledger.errors import ConfigError

ALERT_EVENTS = ("warn", "halt", "uncertainty", "broken", "unavailable", "drift")
_VERDICT_EVENTS = {
    "budget.warn_90": "warn",
    "budget.halt_100": "halt",
    "budget.halt_uncertainty": "uncertainty",
}
_URL_RE = re.compile(r"^https?://[^\s/]+(/\S*)?$")
_URL_MAX = 4096
_REF_CHARS = 12

# What lifts each uncertainty, in the words the operator acts on.
_UNCERTAINTY_ACTION = {
    "counter_inconsistent": "run `ledger verify-chain`, then `ledger recover` or "
    "`ledger rebuild-state` as it says",
    "counter_drift": "run `ledger reconcile` (or `ledger reconcile --force-reason TEXT`)",
    "billing_stale": "check the observer and run `ledger poll`",
    "provider_lag": "the provider's bill is behind; run `ledger poll` once it catches up",
    "clock_drift": "check the host's clock (NTP)",
}


@dataclass(frozen=True)
class AlertRule:
    """One ``[[alerts]]`` table: where to POST, and for which events."""

    url: str
    on: frozenset[str]


@dataclass(frozen=True)
class Alert:
    """One message for people, and the key that keeps it from repeating."""

    event: str
    scope: str
    period: str
    verdict_ref: str | None
    at: str
    text: str

    @property
    def key(self) -> str:
        """Sent once per state, scope and period."""
        return f"{self.event}|{self.scope}|{self.period}"

    def body(self) -> dict[str, Any]:
        """The JSON object POSTed to the webhook."""
        return {
            "text": self.text,
            "event": self.event,
            "scope": self.scope,
            "verdict_ref": self.verdict_ref,
            "at": self.at,
        }


def parse_rules(value: Any, name: str) -> tuple[AlertRule, ...]:
    """Validate the ``[[alerts]]`` array of tables.

    Raises:
        ValueError: the message names the table and key at fault.
    """
    if not isinstance(value, list):
        raise ValueError(f"{name}: must be an array of tables ([[alerts]])")
    rules = []
    for index, table in enumerate(value):
        where = f"{name}[{index}]"
        if not isinstance(table, dict):
            raise ValueError(f"{where}: must be a table")
        unknown = sorted(set(table) - {"url", "on", "check_seconds", "timeout_seconds"})
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]}")
        url = table.get("url")
        if not isinstance(url, str) or len(url) > _URL_MAX or not _URL_RE.match(url):
            raise ValueError(f"{where}.url: must be an http:// or https:// URL")
        events = table.get("on", list(ALERT_EVENTS))
        if (
            not isinstance(events, list)
            or not events
            or not all(isinstance(e, str) and e in ALERT_EVENTS for e in events)
        ):
            raise ValueError(f"{where}.on: must be a non-empty list of {', '.join(ALERT_EVENTS)}")
        rules.append(AlertRule(url=url, on=frozenset(events)))
    return tuple(rules)


def redacted_url(url: str) -> str:
    """``scheme://host/…``: a webhook URL without path, query or credentials, as logs show it.

    Slack-style webhooks keep their secret in the path, others in the query or
    in ``user:password@``; none of it is ever written to a log.
    """
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    where = host if port is None else f"{host}:{port}"
    return f"{parts.scheme}://{where}/…"


def smallest_seconds(value: Any, name: str, key: str) -> int | None:
    """The smallest ``key`` (``check_seconds``, ``timeout_seconds``) in any ``[[alerts]]`` table.

    Raises:
        ValueError: a value that is not an integer ≥ 1.
    """
    found: list[int] = []
    for index, table in enumerate(value if isinstance(value, list) else []):
        if isinstance(table, dict) and key in table:
            seconds = table[key]
            if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
                raise ValueError(f"{name}[{index}].{key}: must be an integer ≥ 1")
            found.append(seconds)
    return min(found) if found else None


def alert_settings(value: Any, name: str) -> dict[str, Any]:
    """``[[alerts]]`` as ``Config`` fields: the webhooks and the smallest of each timing key.

    TOML cannot hold both an array ``[[alerts]]`` and a table ``[alerts]``, so
    ``check_seconds`` and ``timeout_seconds`` are written inside an ``[[alerts]]``
    table (or given as ``LEDGER_ALERTS_CHECK_SECONDS`` / ``LEDGER_ALERTS_TIMEOUT_SECONDS``).

    Raises:
        ConfigError: the message names the table and key at fault.
    """
    try:
        found: dict[str, Any] = {"alert_rules": parse_rules(value, name)}
        seconds = smallest_seconds(value, name, "check_seconds")
        timeout = smallest_seconds(value, name, "timeout_seconds")
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if seconds is not None:
        found["alert_check_seconds"] = seconds
    if timeout is not None:
        found["alert_timeout_seconds"] = timeout
    return found


def _short(ref: str | None) -> str:
    return "" if ref is None else f" (verdict {ref[:_REF_CHARS]})"


def _names(scope: str, budget: dict[str, Any]) -> bool:
    """Whether ``scope`` (``budget:<name>`` or ``budget:<name>[<value>]``) is this budget's."""
    name = scope.removeprefix("budget:").split("[", 1)[0]
    return name == budget.get("name")


def _period_of(payload: dict[str, Any], scope: str) -> str:
    """The period an alert is once per: the budget's period, else the budget day."""
    if scope.startswith("budget:"):
        for budget in payload.get("budgets") or []:
            if not isinstance(budget, dict) or not _names(scope, budget):
                continue
            start = budget.get("period_start")
            # A rolling window's start moves with every verdict: once per budget
            # day for those, else one alert per verdict.
            if isinstance(start, str) and not str(budget.get("period")).startswith("rolling:"):
                return start
    day = payload.get("budget_day") or payload.get("utc_day")
    return str(day) if day is not None else "?"


def _shown_scope(scope: str) -> str:
    """A scope for a chat message: a per-value budget's value (a caller's id) made inert."""
    name, bracket, value = scope.partition("[")
    if not bracket:
        return scope
    return f"{name}[{for_chat(value.removesuffix(']'))}]"


def _deciding_budget(payload: dict[str, Any], scope: str) -> dict[str, Any] | None:
    if not scope.startswith("budget:"):
        return None
    for budget in payload.get("budgets") or []:
        if isinstance(budget, dict) and _names(scope, budget):
            return budget
    return None


def _local_date(ts: Any, zone: dt.tzinfo) -> str | None:
    try:
        return parse_ts(str(ts)).astimezone(zone).date().isoformat()
    except ValueError:
        return None


def _minute(ts: Any) -> str:
    text = str(ts)
    return f"{text[:10]} {text[11:16]}Z" if len(text) >= 16 else text  # noqa: PLR2004


def period_words(payload: dict[str, Any], scope: str, zone: dt.tzinfo = dt.UTC) -> str:
    """The period an alert speaks of, said the same way for every scope.

    A day as its date (``on 2026-11-26``), a week or a month by its first day
    and kind (``in the week starting 2026-11-23``), a rolling window by its
    bounds (``in the rolling window 2026-11-26 09:00Z to 2026-11-26 14:00Z``).
    """
    day = payload.get("budget_day") or payload.get("utc_day") or "?"
    budget = _deciding_budget(payload, scope)
    if budget is None:
        return f"on {day}"
    kind = str(budget.get("period"))
    if kind == "total":
        return "in total (it never resets)"
    if kind.startswith("rolling:"):
        start, end = budget.get("period_start"), budget.get("period_end")
        if start is None or end is None:
            return f"in its rolling window on {day}"
        return f"in the rolling window {_minute(start)} to {_minute(end)}"
    if kind in ("week", "month"):
        first = _local_date(budget.get("period_start"), zone)
        return f"in the {kind} starting {first}" if first else f"in the {kind} of {day}"
    return f"on {day}"


def _verdict_text(event: str, payload: dict[str, Any], scope: str, when: str, ref: str) -> str:
    used = usd_text(int(payload.get("usd_used_micros") or 0))
    reserved = usd_text(int(payload.get("usd_reserved_micros") or 0))
    cap_micros = payload.get("cap_micros")
    cap = "no cap" if cap_micros is None else f"cap {usd_text(int(cap_micros))}"
    figures = f"{used} used + {reserved} reserved of {cap}"
    if payload.get("estimated_micros") is not None:
        figures += f"; this call {usd_text(int(payload['estimated_micros']))}"
    agent = payload.get("agent")
    where = f"{_shown_scope(scope)} {when}" + (f", agent {for_chat(str(agent))}" if agent else "")
    if event == "uncertainty":
        reason = str(payload.get("uncertainty_reason") or "unknown")
        action = _UNCERTAINTY_ACTION.get(reason, "see `ledger explain`")
        remedy = remedy_in(str(payload.get("diagnostic") or ""))
        if reason == "counter_inconsistent" and remedy is not None:
            action = f"run {remedy}"
        return f"ledger: spend halted ({reason}) for {where}; {figures}; {action}{_short(ref)}"
    if event == "halt":
        return f"ledger: spend halted at the cap for {where}; {figures}{_short(ref)}"
    return f"ledger: spend near the cap for {where}; {figures}{_short(ref)}"


def alert_for_entry(
    event_type: str,
    payload: dict[str, Any],
    entry_hash: str,
    ts_utc: str,
    zone: dt.tzinfo = dt.UTC,
) -> Alert | None:
    """The alert one sealed entry raises, if any (verdict halts and warnings, blocking drift).

    ``zone`` is the budget day's (``usd.day_timezone``): a week or month is
    named by its first day there.
    """
    event = _VERDICT_EVENTS.get(event_type)
    if event is not None:
        scope = str(payload.get("deciding_cap") or "aggregate")
        period = _period_of(payload, scope)
        return Alert(
            event=event,
            scope=scope,
            period=period,
            verdict_ref=entry_hash,
            at=ts_utc,
            text=_verdict_text(
                event, payload, scope, period_words(payload, scope, zone), entry_hash
            ),
        )
    if event_type == "chain.finding":
        # A full verification (verify-chain, the daemon) found damage the
        # follower cannot see by reading new lines: an old line edited in place.
        day = ts_utc[:10]
        line = payload.get("line")
        return broken_alert(
            int(line) if isinstance(line, int) else 0, str(payload.get("reason")), ts_utc, day
        )
    if event_type == "budget.reconcile" and payload.get("blocking") is True:
        provider = str(payload.get("provider") or "aggregate")
        scope = "aggregate" if provider == "aggregate" else f"provider:{provider}"
        period = str(payload.get("utc_day") or "?")
        counter = usd_text(int(payload.get("counter_micros") or 0))
        billing = payload.get("billing_micros")
        bill = "unknown" if billing is None else usd_text(int(billing))
        text = (
            f"ledger: counter and bill disagree for {scope} on {period}: drift "
            f"{payload.get('drift_pct')}% (counter {counter}, bill {bill}); spend halts until "
            "a reconcile agrees or `ledger reconcile --force-reason TEXT`"
        )
        return Alert("drift", scope, period, None, ts_utc, text)
    return None


def broken_alert(line: int, reason: str, at: str, day: str) -> Alert:
    """The alert for a chain that no longer verifies (once per budget day)."""
    text = (
        f"ledger: the chain is BROKEN at line {line} ({reason}); every verdict halts "
        "until `ledger recover` restores a verifying chain"
    )
    return Alert("broken", "chain", day, None, at, text)
