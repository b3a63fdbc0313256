"""The daemon's alert follower: read the chain's new entries, POST what people must hear.

Run every ``alerts.check_seconds`` by the daemon, never on the per-call path: a
verdict never waits for a webhook. Each run reads the entries sealed since the
last run (the position is kept in the home), turns halts, warnings, blocking
reconciles and a chain that no longer links into alerts (``ledger.core.alerts``),
queues each alert once per state, scope and period for every webhook that asked
for its event, and delivers the queue: every due delivery in one round, side by
side, each within ``alerts.timeout_seconds`` for the whole request, so a slow
webhook never holds back another. A delivery that fails is retried with backoff
(1 s, 2 s, 4 s … at most 5 min between tries) and given up after
``MAX_ATTEMPTS`` tries, with a log line. Logs show a webhook as
``scheme://host/…`` only: its path, query and credentials may be its secret.

The first run on a home starts at the chain's current head: old halts are history,
not news.

Some conditions halt every verdict without any entry saying so (the refusals
cannot be sealed): a torn or broken chain, a store that cannot be reached, an
uncertainty every verdict runs into. Each run also asks what stands now
(``services.billing.health``) and keeps each such condition as an open
incident: one alert when it begins, one ``recovered`` alert when it clears.
A break the follower itself meets (a line that no longer links, a sealed
BROKEN finding) opens the same ``broken`` incident, so it is told once.
"""

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ledger.core.alerts import Alert, alert_for_entry, redacted_url
from ledger.core.config import Config
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.incidents import Condition, incident_alert, recovered_alert
from ledger.core.timefmt import budget_day, format_ts, parse_ts
from ledger.errors import ChainIOError
from ledger.services.ports import ChainStore

MAX_ATTEMPTS = 12
_MAX_BACKOFF_SECONDS = 300
_MAX_PENDING = 1000
_KEEP_SENT_DAYS = 45


# POST each (url, body) of one round side by side within the timeout; for each,
# None (taken) or the failure, whose message never quotes the URL.
PostAll = Callable[[list[tuple[str, dict[str, Any]]], float], list[Exception | None]]
# What halts every verdict now (``services.billing.health``); None: cannot tell.
Standing = Callable[[], list[Condition] | None]
# The ``warn`` alerts the scopes' used spend calls for now (``services.billing.spent``).
Spent = Callable[[], list[Alert]]


class AlertState(Protocol):
    """Where the follower keeps its position, the keys it sent and what is pending."""

    def load(self) -> dict[str, Any]:
        """The saved state, or an empty one."""
        ...

    def save(self, state: dict[str, Any]) -> None:
        """Replace the saved state durably."""
        ...


@dataclass
class AlertRun:
    """What one run did: alerts queued, deliveries made, deliveries that failed."""

    queued: int = 0
    delivered: int = 0
    failed: int = 0


def run_alerts(
    chain: ChainStore,
    config: Config,
    store: AlertState,
    now: dt.datetime,
    post_all: PostAll,
    log: Callable[[str], None],
    standing: Standing | None = None,
    spent: Spent | None = None,
) -> AlertRun:
    """Follow the chain from the saved position, open and close incidents, deliver the queue.

    Warnings on used spend are queued before the entries' halts: a scope warns
    before it halts, so its alerts go out in the order its states were entered.
    """
    run = AlertRun()
    if not config.alert_rules:
        return run
    state = store.load()
    conditions = standing() if standing is not None else []
    if spent is not None and not _halting(conditions):
        for alert in spent():
            run.queued += _queue(state, alert, config, now)
    if not any(condition.event == "unavailable" for condition in conditions or []):
        try:
            breaks = _follow_from_position(chain, state, now, config, run)
        except ChainIOError as exc:
            breaks, conditions = [], [Condition("unavailable", "store", str(exc))]
        if conditions is not None:
            conditions = breaks + conditions
    if conditions is not None:
        run.queued += _incidents(state, conditions, config, now)
    _prune_sent(state, now)
    store.save(state)
    _deliver(state, now, post_all, float(config.alert_timeout_seconds), log, run)
    store.save(state)
    return run


def _halting(conditions: list[Condition] | None) -> bool:
    """Whether the figures are unknown now (no used-spend warning is read then)."""
    return conditions is None or any(c.event in ("broken", "unavailable") for c in conditions)


def _follow_from_position(
    chain: ChainStore, state: dict[str, Any], now: dt.datetime, config: Config, run: AlertRun
) -> list[Condition]:
    """Queue the alerts of the entries after the saved position; the breaks met on the way."""
    if not chain.exists():
        return []  # nothing sealed yet: nothing to follow
    if _lost_place(chain, state):
        state.update(_start_at_head(chain, state))
        return []
    alerts, breaks = _follow(chain, state, config)
    for alert in alerts:
        run.queued += _queue(state, alert, config, now)
    return breaks


def _incidents(
    state: dict[str, Any], conditions: list[Condition], config: Config, now: dt.datetime
) -> int:
    """Open an incident for each new condition and close those gone; the deliveries queued.

    An uncertainty a sealed verdict already told of (the same scope and budget
    day) opens its incident without a second message, and one opened here
    keeps the verdicts' own alert for that day from repeating it.
    """
    incidents: dict[str, dict[str, str]] = state.setdefault("incidents", {})
    sent: dict[str, str] = state.setdefault("sent", {})
    at, day = format_ts(now), budget_day(now, config.day_zone)
    standing: dict[str, Condition] = {}
    for condition in conditions:
        standing.setdefault(condition.key, condition)
    queued = 0
    for key, condition in standing.items():
        if key in incidents:
            continue
        incidents[key] = {"event": condition.event, "scope": condition.scope, "since": at}
        verdicts_key = f"{condition.event}|{condition.scope}|{day}"
        if condition.event == "uncertainty" and verdicts_key in sent:
            continue
        sent[verdicts_key] = at
        queued += _enqueue(state, incident_alert(condition, at, day), condition.event, config, now)
    for key in [key for key in incidents if key not in standing]:
        gone = incidents.pop(key)
        alert = recovered_alert(gone["event"], gone["scope"], gone["since"], at, day)
        queued += _enqueue(state, alert, gone["event"], config, now)
    return queued


def prime_alerts(chain: ChainStore, config: Config, store: AlertState) -> int | None:
    """Fix where alerts start before the daemon says it has started; the line they follow from.

    What the chain holds now is not news, and everything sealed after it is:
    taken at the first scheduled check instead, a verdict sealed between the
    start and a late first check (a busy machine) would count as old and its
    alert would never be sent. A position saved by an earlier run is kept
    (``None``), so what that run had not yet sent still goes out.
    """
    if not config.alert_rules:
        return None
    state = store.load()
    if not _lost_place(chain, state):
        return None
    state = _start_at_head(chain, state)
    store.save(state)
    return int(state["line"])


def _lost_place(chain: ChainStore, state: dict[str, Any]) -> bool:
    """Whether no saved position names a place the chain still has (alerts start at its end)."""
    return "position" not in state or not _still_there(chain, state)


def _start_at_head(chain: ChainStore, old: dict[str, Any]) -> dict[str, Any]:
    """A position at the chain's end (counting its lines once); sent keys kept."""
    state: dict[str, Any] = {
        "position": 0,
        "line": 0,
        "last_start": None,
        "last_hash": None,
        "sent": old.get("sent", {}),
        "pending": old.get("pending", []),
        "incidents": old.get("incidents", {}),
    }
    if not chain.exists():
        return state
    for line in chain.iter_lines(0):
        if not line.endswith(b"\n"):
            break
        _advance(state, line, _hash_or_none(line))
    return state


def _hash_or_none(line: bytes) -> str | None:
    try:
        return parse_line(line.rstrip(b"\n")).entry_hash
    except EnvelopeFormatError:
        return None


def _advance(state: dict[str, Any], line: bytes, entry_hash: str | None) -> None:
    state["last_start"] = state["position"]
    state["position"] += len(line)
    state["line"] += 1
    state["last_hash"] = entry_hash


def _still_there(chain: ChainStore, state: dict[str, Any]) -> bool:
    """Whether the last line read is still where it was (a recover rewrites the chain)."""
    start = state.get("last_start")
    if start is None:
        return state.get("position") == 0
    lines = list(chain.iter_lines(int(start), int(state["position"])))
    return len(lines) == 1 and _hash_or_none(lines[0]) == state.get("last_hash")


def _broken(number: int, reason: str) -> Condition:
    return Condition("broken", "chain", f"BROKEN at line {number} ({reason})")


def _follow(
    chain: ChainStore, state: dict[str, Any], config: Config
) -> tuple[list[Alert], list[Condition]]:
    """The alerts of the complete lines after the position, and the break it stopped at.

    A line that does not parse or link stops the follower where it is (the next
    run meets it again while it stands); a sealed BROKEN finding is read past.
    Both are a ``broken`` condition, not an alert of their own.
    """
    alerts: list[Alert] = []
    breaks: list[Condition] = []
    for line in chain.iter_lines(int(state["position"])):
        if not line.endswith(b"\n"):
            break  # still being written, or torn: the health check sees a torn tail
        number = state["line"] + 1
        try:
            parsed = parse_line(line.rstrip(b"\n"))
        except EnvelopeFormatError as exc:
            return alerts, [*breaks, _broken(number, str(exc))]
        expected = state["last_hash"] or "GENESIS"
        if parsed.prev_hash != expected:
            return alerts, [*breaks, _broken(number, "prev_hash does not match")]
        _advance(state, line, parsed.entry_hash)
        if parsed.event_type == "chain.finding":
            # A full verification found an old line edited in place; until
            # `ledger recover` the health check sees the finding itself.
            found = parsed.payload.get("line")
            reason = str(parsed.payload.get("reason"))
            breaks.append(_broken(found if isinstance(found, int) else 0, reason))
            continue
        alert = alert_for_entry(
            parsed.event_type, parsed.payload, parsed.entry_hash, parsed.ts_utc, config.day_zone
        )
        # A warn-90 verdict is a projection (its call's worst case): `warn`
        # alerts follow used spend instead (``services.billing.spent``).
        if alert is not None and alert.event != "warn":
            alerts.append(alert)
    return alerts, breaks


def _queue(state: dict[str, Any], alert: Alert, config: Config, now: dt.datetime) -> int:
    """Queue ``alert`` for every webhook that asked for its event, once per key."""
    sent: dict[str, str] = state.setdefault("sent", {})
    if alert.key in sent:
        return 0
    sent[alert.key] = format_ts(now)
    return _enqueue(state, alert, alert.event, config, now)


def _enqueue(
    state: dict[str, Any], alert: Alert, event: str, config: Config, now: dt.datetime
) -> int:
    """Queue ``alert`` for every webhook that asked for ``event`` (a recovery: the incident's)."""
    pending: list[dict[str, Any]] = state.setdefault("pending", [])
    queued = 0
    for rule in config.alert_rules:
        if event in rule.on and len(pending) < _MAX_PENDING:
            pending.append(
                {"url": rule.url, "body": alert.body(), "attempts": 0, "next_try": format_ts(now)}
            )
            queued += 1
    return queued


def _deliver(
    state: dict[str, Any],
    now: dt.datetime,
    post_all: PostAll,
    timeout: float,
    log: Callable[[str], None],
    run: AlertRun,
) -> None:
    """Try every delivery that is due, side by side; reschedule failures with backoff.

    The alerts of one scope reach one webhook in the order they were queued:
    each round posts the oldest undelivered alert of every (webhook, scope)
    side by side, then the next of those that were taken, and so on; a failed
    or not yet due alert holds back the later ones of its scope (a `halt`
    never arrives before its `warn`).
    """
    pending: list[dict[str, Any]] = state.get("pending", [])
    done: set[int] = set()
    blocked: set[tuple[str, str]] = set()
    while True:
        wave: list[int] = []
        heads: set[tuple[str, str]] = set()
        for index, item in enumerate(pending):
            group = (str(item["url"]), str(item["body"].get("scope")))
            if index in done or group in blocked or group in heads:
                continue
            heads.add(group)
            if parse_ts(item["next_try"]) <= now:
                wave.append(index)
            else:
                blocked.add(group)
        if not wave:
            break
        outcomes = post_all([(pending[i]["url"], pending[i]["body"]) for i in wave], timeout)
        for index, failure in zip(wave, outcomes, strict=True):
            item = pending[index]
            shown = redacted_url(item["url"])
            if failure is None:
                run.delivered += 1
                done.add(index)
                log(f"alert sent to {shown}: {item['body']['event']} {item['body']['scope']}")
                continue
            item["attempts"] += 1
            run.failed += 1
            if item["attempts"] >= MAX_ATTEMPTS:
                done.add(index)
                log(f"alert to {shown} given up after {item['attempts']} tries: {failure}")
                continue
            delay = min(2 ** (item["attempts"] - 1), _MAX_BACKOFF_SECONDS)
            item["next_try"] = format_ts(now + dt.timedelta(seconds=delay))
            log(f"alert to {shown} failed ({failure}); retrying in {delay} s")
            blocked.add((str(item["url"]), str(item["body"].get("scope"))))
    state["pending"] = [item for index, item in enumerate(pending) if index not in done]


def _prune_sent(state: dict[str, Any], now: dt.datetime) -> None:
    """Forget sent keys older than any period they could still repeat in."""
    horizon = now - dt.timedelta(days=_KEEP_SENT_DAYS)
    sent: dict[str, str] = state.get("sent", {})
    state["sent"] = {key: at for key, at in sent.items() if parse_ts(at) >= horizon}
