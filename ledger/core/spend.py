"""USD spend as a fold over chain events, and the per-scope view the gate reads.

State is plain JSON-able data so that it can be stored beside the chain and
rebuilt from it at any time. Amounts are integer micro-USD. Only today and
yesterday are kept: a new day needs no reset job, yesterday's spend and
reservations simply stop counting.

Days are budget days (SPEC §10): midnight to midnight in ``usd.day_timezone``
(UTC unless configured). The fold takes each entry's budget day from its own
``ts_utc`` and the zone it is given, never from a day written in the payload
(payloads' ``utc_day`` keeps meaning the UTC day), so a state folded under one
zone is rebuilt when the zone changes. Spend, re-bases and the time of the
newest spend are keyed by budget day; a reservation and an unpriced record
carry theirs as ``budget_day`` beside the payload's ``utc_day``. A record that
settles a live reservation counts on that reservation's budget day (SPEC §4).
"""

import datetime as dt
from typing import Any, NamedTuple

from ledger.core.timefmt import budget_day, parse_ts

AGGREGATE = "aggregate"
VERDICT_EVENTS = frozenset({"budget.allow", "budget.warn_90"})


def empty_usd_state() -> dict[str, Any]:
    """The USD state of an empty chain."""
    return {
        "spend": {},
        "last_spend": {},
        "rebase": {},
        "reservations": {},
        "readings": {},
        "attempts": {},
        "reconciles": {},
        "unpriced": {},
    }


def _previous_day(day: str) -> str:
    return (dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat()


def _prune(usd: dict[str, Any], day: str, ts_utc: str) -> None:
    keep = {day, _previous_day(day)}
    for table in ("spend", "last_spend", "rebase"):
        for old in [d for d in usd[table] if d not in keep and d < day]:
            del usd[table][old]
    unpriced = usd.get("unpriced") or {}
    for ref in [ref for ref, rec in unpriced.items() if rec["budget_day"] not in keep]:
        del unpriced[ref]
    # Reservations from older days, or already expired when this entry was
    # sealed, count for nothing: dropping them keeps the state (and so every
    # verdict) small even when calls are never recorded.
    # A forwarded reservation (its request reached the provider) never lapses to
    # nothing, however old: it stays until a record settles it, its own or the
    # charge at its estimate that the next verdict seals once it has expired.
    stale = [
        ref
        for ref, res in usd["reservations"].items()
        if not res.get("forwarded")
        and (
            (res["budget_day"] < day and res["budget_day"] not in keep)
            or res["expires_at"] <= ts_utc
        )
    ]
    for ref in stale:
        del usd["reservations"][ref]


def _newer_reading(usd: dict[str, Any], reading: dict[str, Any]) -> None:
    provider = reading["provider"]
    current = usd["readings"].get(provider)
    if current is None or reading["fetched_at"] >= current["fetched_at"]:
        usd["readings"][provider] = {
            "usd_used_micros": reading["usd_used_micros"],
            "billing_ts": reading["billing_ts"],
            "server_ts": reading.get("server_ts"),
            "fetched_at": reading["fetched_at"],
        }


def _attempt(usd: dict[str, Any], provider: str, fetched_at: str) -> None:
    if fetched_at >= usd["attempts"].get(provider, ""):
        usd["attempts"][provider] = fetched_at


def negative_amount(event_type: str, payload: dict[str, Any]) -> str | None:
    """A description of a negative amount in a payload, or ``None``.

    Our schemas forbid negatives; a chain from another writer might not.
    """
    for key, value in payload.items():
        if key.endswith("_micros") and isinstance(value, int) and value < 0:
            return f"negative {key} in {event_type}"
        if isinstance(value, dict):
            inner = negative_amount(event_type, value)
            if inner:
                return inner
    return None


def apply_usd_event(
    usd: dict[str, Any],
    event_type: str,
    ts_utc: str,
    payload: dict[str, Any],
    entry_hash: str,
    zone: dt.tzinfo = dt.UTC,
) -> None:
    """Fold one ``budget.*`` event into the USD state (in place), days taken in ``zone``."""
    day = budget_day(parse_ts(ts_utc), zone)
    _prune(usd, day, ts_utc)
    if event_type in VERDICT_EVENTS:
        reservation = payload.get("reservation")
        if isinstance(reservation, dict):
            usd["reservations"][entry_hash] = {
                "micros": reservation["micros"],
                "provider": payload.get("provider"),
                "utc_day": payload["utc_day"],
                "budget_day": day,
                "expires_at": reservation["expires_at"],
            }
            if reservation.get("forwarded"):
                usd["reservations"][entry_hash]["forwarded"] = True
    elif event_type == "budget.record_call":
        # SPEC §4: a record that settles a live reservation counts on that
        # reservation's budget day; any other record on its own. Reservations
        # expired by this entry's time were pruned above, as the gate judged.
        ref = payload.get("verdict_ref")
        live = usd["reservations"].get(ref) if ref else None
        spend_day = live["budget_day"] if live is not None else day
        provider = payload["provider"]
        actual = payload["actual_micros"]
        if actual is None:
            # SPEC §7: spend whose price is unknown is kept, never taken as $0;
            # the gate halts on it until it is priced or re-based.
            usd.setdefault("unpriced", {})[entry_hash] = {
                "provider": provider,
                "utc_day": payload["utc_day"],
                "budget_day": spend_day,
                "model": payload.get("model_id"),
            }
        else:
            by_provider = usd["spend"].setdefault(spend_day, {})
            by_provider[provider] = by_provider.get(provider, 0) + actual
        usd["last_spend"].setdefault(spend_day, {})[provider] = ts_utc
        if ref:
            usd["reservations"].pop(ref, None)
    elif event_type == "budget.observation":
        _attempt(usd, payload["provider"], payload["fetched_at"])
        if payload.get("ok"):
            _newer_reading(usd, payload)
    elif event_type == "budget.reconcile":
        provider = payload["provider"]
        reading = payload.get("reading")
        if isinstance(reading, dict):
            _attempt(usd, provider, reading["fetched_at"])
            if reading.get("ok"):
                _newer_reading(usd, reading)
        if payload.get("billing_api_unreachable"):
            return
        usd["reconciles"][provider] = {
            "blocking": bool(payload["blocking"]) and not payload.get("forced"),
            "drift_pct": payload["drift_pct"],
            "ts": ts_utc,
            "forced": bool(payload.get("forced")),
        }
        if payload.get("forced"):
            # The reconcile judged the counter of its own budget day.
            _forget_unpriced(usd, provider, day)
            delta = payload["billing_micros"] - payload["counter_micros"]
            by_provider = usd["rebase"].setdefault(day, {})
            by_provider[provider] = by_provider.get(provider, 0) + delta


def expired_forwarded(usd: dict[str, Any], now: dt.datetime) -> list[tuple[str, dict[str, Any]]]:
    """Forwarded reservations expired unrecorded by ``now``, oldest first: each is charged."""
    now_text = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    due = [
        (ref, res)
        for ref, res in usd["reservations"].items()
        if res.get("forwarded") and res["expires_at"] <= now_text
    ]
    return sorted(due, key=lambda item: (item[1]["expires_at"], item[0]))


def unsettled(usd: dict[str, Any]) -> tuple[int, int]:
    """How many forwarded reservations wait for a record, and their estimates in micro-USD."""
    found = [res["micros"] for res in usd["reservations"].values() if res.get("forwarded")]
    return len(found), sum(found)


def _forget_unpriced(usd: dict[str, Any], provider: str, day: str) -> None:
    """A forced reconcile re-bases its scope to the bill, which covers unpriced spend."""
    unpriced = usd.get("unpriced") or {}
    for ref in [
        ref
        for ref, rec in unpriced.items()
        if rec["budget_day"] == day and provider in {AGGREGATE, rec["provider"]}
    ]:
        del unpriced[ref]


def apply_priced(usd: dict[str, Any], priced: list[dict[str, Any]]) -> None:
    """Fold the prices ``rebuild-state`` sealed for records that had none.

    Each item names the unpriced record (its entry hash) and its cost; only a
    record still unpriced is charged, so no spend is ever counted twice.
    """
    unpriced = usd.get("unpriced") or {}
    for item in priced:
        record = unpriced.pop(item["entry_hash"], None)
        if record is None:
            continue
        by_provider = usd["spend"].setdefault(record["budget_day"], {})
        provider = record["provider"]
        by_provider[provider] = by_provider.get(provider, 0) + item["actual_micros"]


def unpriced_problem(usd: dict[str, Any], day: str) -> str | None:
    """SPEC §4 row 1: recorded spend of ``day`` whose price is unknown, or ``None``."""
    found = sorted(
        f"{rec['provider']}/{rec.get('model') or '(no model)'}"
        for rec in (usd.get("unpriced") or {}).values()
        if rec["budget_day"] == day
    )
    if not found:
        return None
    names = ", ".join(dict.fromkeys(found))
    return (
        f"recorded spend whose price is unknown ({len(found)} call(s): {names}); price the "
        "model in ledger.toml or run `ledger prices sync`, then `ledger rebuild-state`; "
        "or re-base with `ledger reconcile --force-reason`"
    )


class Reading(NamedTuple):
    """A successful billing reading as the gate sees it."""

    usd_used_micros: int
    billing_ts: dt.datetime
    server_ts: dt.datetime | None
    fetched_at: dt.datetime


class ScopeState(NamedTuple):
    """Everything the gate knows about one cap's scope on one budget day."""

    key: str
    cap_micros: int
    local_micros: int
    billing_micros: int | None
    reserved_micros: int
    last_spend_ts: dt.datetime | None
    reading: Reading | None
    reconcile_blocking: bool
    reconcile_drift_pct: str | None

    @property
    def used_micros(self) -> int:
        """The larger of the local counter and today's billing figure (SPEC §4)."""
        if self.billing_micros is None:
            return self.local_micros
        return max(self.local_micros, self.billing_micros)


def _reading(raw: dict[str, Any] | None) -> Reading | None:
    if raw is None:
        return None
    server = raw.get("server_ts")
    return Reading(
        raw["usd_used_micros"],
        parse_ts(raw["billing_ts"]),
        parse_ts(server) if server else None,
        parse_ts(raw["fetched_at"]),
    )


def scope_state(
    usd: dict[str, Any],
    provider: str | None,
    cap_micros: int,
    day: str,
    now: dt.datetime,
    zone: dt.tzinfo = dt.UTC,
) -> ScopeState:
    """The view of one scope on budget day ``day``: the aggregate (``provider`` None) or one.

    A billing reading counts for the budget day (in ``zone``) on which it was fetched.
    """
    spend_today: dict[str, int] = usd["spend"].get(day, {})
    rebase_today: dict[str, int] = usd["rebase"].get(day, {})
    last_today: dict[str, str] = usd["last_spend"].get(day, {})
    now_text = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    open_reservations = [
        res
        for res in usd["reservations"].values()
        if res["budget_day"] == day and (res["expires_at"] > now_text or res.get("forwarded"))
    ]
    if provider is None:
        key_name = AGGREGATE
        local = sum(spend_today.values()) + rebase_today.get(AGGREGATE, 0)
        reserved = sum(res["micros"] for res in open_reservations)
        last = max(last_today.values(), default=None)
        scope_key = AGGREGATE
    else:
        key_name = provider
        local = spend_today.get(provider, 0) + rebase_today.get(provider, 0)
        reserved = sum(res["micros"] for res in open_reservations if res["provider"] == provider)
        last = last_today.get(provider)
        scope_key = f"provider:{provider}"
    reading = _reading(usd["readings"].get(key_name))
    billing = None
    if reading is not None and budget_day(reading.fetched_at, zone) == day:
        billing = reading.usd_used_micros
    reconcile = usd["reconciles"].get(key_name) or {}
    return ScopeState(
        key=scope_key,
        cap_micros=cap_micros,
        local_micros=max(local, 0),
        billing_micros=billing,
        reserved_micros=reserved,
        last_spend_ts=parse_ts(last) if last else None,
        reading=reading,
        reconcile_blocking=bool(reconcile.get("blocking")),
        reconcile_drift_pct=reconcile.get("drift_pct"),
    )
