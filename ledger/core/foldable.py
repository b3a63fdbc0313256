"""Which verified entries the counter can fold, and in what shape (SPEC §4, §5).

A verified entry is signed by a trusted key, but that says nothing about its
payload: a writer bug or a compromised key can seal anything. Before an entry
of one of the namespaces this product writes is folded, its payload is held
against the event type's schema and a few facts no schema can state (times
that parse, a spend day that belongs to the entry's time). An entry that fails
is not folded at all and the counter halts ``counter_inconsistent`` naming its
line; entries of other namespaces (another tool's events in a shared log) are
carried along and ignored.

Logs begun by loa's cost-budget-enforcer use the same envelope with other
payload field names and USD as JSON numbers; those payloads are translated to
ours here, converting each amount exactly from its shortest decimal text.
"""

import datetime as dt
from collections.abc import Callable
from typing import Any

from ledger.core.events import schema_errors
from ledger.core.timefmt import parse_ts, utc_day
from ledger.core.units import usd_to_micros
from ledger.core.verdict_kind import Verdict

OUR_NAMESPACES = frozenset(
    {"budget", "tokens", "turns", "tools", "time", "hook", "ledger", "chain", "gateway", "config"}
)
LOA_VERDICTS = frozenset(
    {"budget.allow", "budget.warn_90", "budget.halt_100", "budget.halt_uncertainty"}
)
# Payload fields that hold a chain-format time, and those that hold a day.
_TIME_FIELDS = frozenset(
    {"billing_ts", "fetched_at", "server_ts", "expires_at", "deadline", "local_time"}
)
_DAY_FIELDS = frozenset({"utc_day", "budget_day"})
_MAX_DEPTH = 16
MAX_SAFE_INTEGER = 2**53 - 1

SchemaFor = Callable[[str], dict[str, Any] | None]

IGNORED = "ignored"
"""``check_entry``'s answer for an entry of another tool's namespace."""


class Foldable:
    """A payload ready to fold (our shape, checked)."""

    __slots__ = ("payload",)

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload


def check_entry(
    event_type: str, ts_utc: str, payload: Any, schema_for: SchemaFor
) -> Foldable | str:
    """The payload to fold, ``IGNORED``, or why the entry cannot be folded."""
    family = event_type.split(".", 1)[0]
    if family not in OUR_NAMESPACES:
        return IGNORED
    if not isinstance(payload, dict):
        return "payload is not an object"
    try:
        moment = parse_ts(ts_utc)
    except ValueError:
        return f"ts_utc {ts_utc!r} is not a time"
    loa = _from_loa(event_type, payload)
    if isinstance(loa, str):
        return loa
    if loa is not None:
        payload = loa.payload
        if not payload:  # a loa verdict: it reserves nothing, so there is nothing to fold
            return loa
    negative = _negative_amount(payload, 0)
    if negative is not None:
        return f"negative {negative}"
    schema = schema_for(event_type)
    if schema is None:
        return f"unknown event type {event_type}"
    problem = schema_errors(payload, schema)
    if problem is not None:
        return f"payload does not match the {event_type} schema: {problem}"
    problem = _reading_problem(event_type, payload, schema_for)
    if problem is not None:
        return problem
    problem = _value_problem(payload, 0)
    if problem is not None:
        return problem
    return _day_problem(event_type, moment, payload) or Foldable(payload)


def _reading_problem(event_type: str, payload: dict[str, Any], schema_for: SchemaFor) -> str | None:
    """A reconcile carries the reading it took: held to the observation schema."""
    reading = payload.get("reading") if event_type == "budget.reconcile" else None
    if reading is None:
        return None
    schema = schema_for("budget.observation")
    problem = "no schema for its reading" if schema is None else schema_errors(reading, schema)
    return None if problem is None else f"reconcile reading does not match: {problem}"


def _negative_amount(value: Any, depth: int) -> str | None:
    """The name of a negative money or token field, anywhere in the payload."""
    if depth > _MAX_DEPTH or not isinstance(value, dict):
        return None
    for key, inner in value.items():
        if (
            isinstance(key, str)
            and key.endswith(("_micros", "_tokens"))
            and isinstance(inner, int | float)
            and not isinstance(inner, bool)
            and inner < 0
        ):
            return key
        found = _negative_amount(inner, depth + 1)
        if found is not None:
            return found
    return None


def _value_problem(value: Any, depth: int) -> str | None:
    """Times that do not parse, days that are not dates, and nesting past any schema."""
    if depth > _MAX_DEPTH:
        return "payload nested too deeply"
    if isinstance(value, float):
        # Our writer seals integers only; a float came from another writer.
        return f"a float ({value!r}) where this product writes integers"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
        return f"integer {value} beyond 2^53 - 1 (not exact in JSON)"
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in _TIME_FIELDS and isinstance(inner, str):
                try:
                    parse_ts(inner)
                except ValueError:
                    return f"{key} {inner[:40]!r} is not a time"
            elif key in _DAY_FIELDS and isinstance(inner, str):
                try:
                    dt.date.fromisoformat(inner)
                except ValueError:
                    return f"{key} {inner[:40]!r} is not a day"
            problem = _value_problem(inner, depth + 1)
            if problem is not None:
                return problem
    elif isinstance(value, list):
        for inner in value:
            problem = _value_problem(inner, depth + 1)
            if problem is not None:
                return problem
    return None


def _day_problem(event_type: str, moment: dt.datetime, payload: dict[str, Any]) -> str | None:
    """Spend must count on the entry's own day, or (settled) the day before it.

    A record dated to a day long past would silently count for nothing today.
    """
    if event_type != "budget.record_call":
        return None
    own = utc_day(moment)
    day = payload["utc_day"]
    if day == own:
        return None
    previous = (moment - dt.timedelta(days=1)).date().isoformat()
    if day == previous and payload.get("settled") is True:
        return None
    return f"utc_day {day} is not the day of its ts_utc ({own})"


def _from_loa(event_type: str, payload: dict[str, Any]) -> Foldable | str | None:
    """The payload of a loa entry in our shape, ``None`` if not loa's, or why it is unreadable."""
    try:
        if event_type == "budget.record_call" and "actual_usd" in payload:
            return _loa_record(payload)
        if event_type == "budget.reconcile" and "counter_usd" in payload:
            return _loa_reconcile(payload)
        if event_type in LOA_VERDICTS and "estimated_usd_for_call" in payload:
            if Verdict.named(payload.get("verdict")) is None:
                return "loa verdict without a verdict"
            return Foldable({})
    except (ValueError, TypeError, KeyError) as exc:
        return f"loa payload unreadable: {exc}"
    return None


def _loa_usd(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{field} is not a number")
    micros = usd_to_micros(value)
    if micros < 0:
        raise ValueError(f"{field} is negative")
    return micros


def _text_or_none(payload: dict[str, Any], field: str) -> str | None:
    value = payload.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} is not text")
    return value


def _loa_record(payload: dict[str, Any]) -> Foldable:
    provider = payload["provider"]
    if not isinstance(provider, str):
        raise ValueError("provider is not text")
    return Foldable(
        {
            "provider": provider,
            "actual_micros": _loa_usd(payload["actual_usd"], "actual_usd"),
            "utc_day": payload["utc_day"],
            "verdict_ref": _text_or_none(payload, "verdict_ref"),
            "settled": False,
            "model_id": _text_or_none(payload, "model_id"),
            "cycle_id": _text_or_none(payload, "cycle_id"),
        }
    )


def _loa_reconcile(payload: dict[str, Any]) -> Foldable:
    unreachable = payload.get("billing_api_unreachable") is True
    counter = _loa_usd(payload["counter_usd"], "counter_usd")
    billing = None if unreachable else _loa_usd(payload["billing_usd"], "billing_usd")
    drift = payload.get("drift_pct")
    threshold = payload["drift_threshold_pct"]
    blocker, forced = payload["blocker"], payload.get("force_reconcile") is True
    if not isinstance(blocker, bool):
        raise ValueError("blocker is not a boolean")
    return Foldable(
        {
            "provider": payload["provider"],
            "utc_day": payload["utc_day"],
            "counter_micros": counter,
            "billing_micros": billing,
            "drift_pct": None if drift is None or unreachable else _pct(drift, "drift_pct"),
            "threshold_pct": _pct(threshold, "drift_threshold_pct"),
            "blocking": blocker,
            "billing_api_unreachable": unreachable,
            "forced": forced,
            "force_reason": _text_or_none(payload, "operator_reason") if forced else None,
            "reason": None,
            "reading": None,
        }
    )


def _pct(value: Any, field: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{field} is not a number")
    micros = usd_to_micros(value, round_up=False)  # exact decimal scaling, 6 places
    if micros < 0:
        raise ValueError(f"{field} is negative")
    whole, rest = divmod(micros, 1_000_000)
    return f"{whole}.{rest // 100:04d}"
