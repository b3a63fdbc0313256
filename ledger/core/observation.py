"""What a UsageObserver said, as typed values (SPEC §5), and its chain payload.

An observer prints exactly one JSON object of one of three shapes::

    {"usd_used": <number>, "billing_ts": "<iso8601>", "server_ts": "<iso8601>"?}
    {"_unreachable": true, "_reason": "..."}
    {"_defer": true, "_reason": "..."}

``parse_observer_output`` turns its stdout into a ``Reading``, ``Unreachable`` or
``Deferred``. It never raises for anything the observer printed: every other
output (invalid JSON, NaN, a negative or boolean amount, a missing or extra
field, a time without a timezone, trailing data) is ``Unreachable`` with a
reason naming the problem. Money becomes integer micro-USD exactly: numbers are
parsed as ``Decimal``, never as ``float``.

``reading_payload`` / ``result_from_payload`` convert to and from the payload of
a ``budget.observation`` envelope (``schemas/budget.observation.schema.json``).
"""

import datetime as dt
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from ledger.core.timefmt import format_ts, parse_iso8601, parse_ts
from ledger.core.units import MICROS_PER_USD, usd_to_micros

PROVIDER_RE: Final = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")

MAX_USD_USED_MICROS: Final = 2**53 - 1
"""The largest amount a reading may carry: an integer every JSON reader keeps exact."""

MAX_REASON_CHARS: Final = 500
"""Reasons are cut to this length before they reach the chain."""

SOURCES: Final = ("verdict", "reconcile", "manual", "poll")
"""Who took a recorded reading (the optional ``source`` payload field)."""

_MIN_YEAR: Final = 1970
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SUCCESS_KEYS: Final = frozenset({"usd_used", "billing_ts", "server_ts"})
_SIGNAL_KEYS: Final = frozenset({"_unreachable", "_defer", "_reason"})
_PAYLOAD_KEYS: Final = frozenset(
    {"provider", "ok", "usd_used_micros", "billing_ts", "server_ts", "fetched_at", "reason"}
)


def _check_provider(provider: object) -> None:
    if not isinstance(provider, str) or not PROVIDER_RE.fullmatch(provider):
        raise ValueError(f"bad provider id: {provider!r}")


def _check_aware(name: str, moment: object) -> None:
    if not isinstance(moment, dt.datetime) or moment.tzinfo is None:
        raise ValueError(f"{name} must be a timezone-aware datetime")


def _check_signal(provider: object, reason: object, fetched_at: object) -> None:
    """The invariants of ``Unreachable`` and ``Deferred`` (see their docstrings)."""
    _check_provider(provider)
    if not isinstance(reason, str) or not reason or len(reason) > MAX_REASON_CHARS:
        raise ValueError(f"reason must be text of 1 to {MAX_REASON_CHARS} characters")
    _check_aware("fetched_at", fetched_at)


@dataclass(frozen=True, slots=True)
class Reading:
    """A successful billing reading: what the provider says was spent today (UTC).

    Attributes:
        provider: the provider id the observer was asked about (``aggregate`` = all).
        usd_used: spend in integer micro-USD (``usd_used_micros``).
        billing_ts: the time up to which the provider's figure is complete.
        server_ts: the provider's clock when it answered, if the observer knew it.
        fetched_at: the local time the observer was started.
    """

    provider: str
    usd_used_micros: int
    billing_ts: dt.datetime
    server_ts: dt.datetime | None
    fetched_at: dt.datetime

    def __post_init__(self) -> None:
        """Check the invariants.

        Raises:
            ValueError: a bad provider id, an amount that is not an integer in
                ``[0, 2**53 - 1]``, or a naive timestamp.
        """
        _check_provider(self.provider)
        amount = self.usd_used_micros
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise ValueError("usd_used_micros must be an integer")
        if not 0 <= amount <= MAX_USD_USED_MICROS:
            raise ValueError(f"usd_used_micros out of range: {amount}")
        _check_aware("billing_ts", self.billing_ts)
        if self.server_ts is not None:
            _check_aware("server_ts", self.server_ts)
        _check_aware("fetched_at", self.fetched_at)


@dataclass(frozen=True, slots=True)
class Unreachable:
    """The observer gave no usable reading; ``reason`` says why.

    Raises:
        ValueError: from construction: a bad provider id, an empty or over-long
            reason, or a naive ``fetched_at``.
    """

    provider: str
    reason: str
    fetched_at: dt.datetime

    def __post_init__(self) -> None:
        """Check the invariants (see the class docstring)."""
        _check_signal(self.provider, self.reason, self.fetched_at)


@dataclass(frozen=True, slots=True)
class Deferred:
    """The observer asked to be asked later (``_defer``, e.g. rate limited); nothing is recorded.

    Raises:
        ValueError: from construction: a bad provider id, an empty or over-long
            reason, or a naive ``fetched_at``.
    """

    provider: str
    reason: str
    fetched_at: dt.datetime

    def __post_init__(self) -> None:
        """Check the invariants (see the class docstring)."""
        _check_signal(self.provider, self.reason, self.fetched_at)


ObserverResult = Reading | Unreachable | Deferred


def clean_reason(text: str, default: str) -> str:
    """``text`` made fit for the chain: control characters replaced, cut to 500 characters."""
    cleaned = _CONTROL_RE.sub(" ", text).strip()
    if not cleaned:
        return default
    if len(cleaned) > MAX_REASON_CHARS:
        cleaned = cleaned[: MAX_REASON_CHARS - 3] + "..."
    return cleaned


class _BadOutputError(ValueError):
    """Internal: the observer's output is malformed; the message is the reason."""


def _reject_constant(name: str) -> Any:
    raise _BadOutputError(f"non-finite number {name} in output")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _BadOutputError(f"duplicate key {key!r} in output")
        result[key] = value
    return result


_DECODER: Final = json.JSONDecoder(
    parse_float=Decimal,
    parse_constant=_reject_constant,
    object_pairs_hook=_no_duplicate_keys,
)


def _decode(stdout: bytes) -> dict[str, Any]:
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _BadOutputError("output is not UTF-8") from exc
    if not text.strip():
        raise _BadOutputError("observer printed nothing")
    start = len(text) - len(text.lstrip())
    try:
        value, end = _DECODER.raw_decode(text, start)
    except _BadOutputError:
        raise
    except json.JSONDecodeError as exc:
        raise _BadOutputError(f"invalid JSON: {exc.msg} at character {exc.pos}") from exc
    except (ValueError, RecursionError) as exc:
        raise _BadOutputError(f"invalid JSON: {type(exc).__name__}") from exc
    if text[end:].strip():
        raise _BadOutputError("trailing data after the JSON object")
    if not isinstance(value, dict):
        raise _BadOutputError(f"output is a JSON {_json_type(value)}, not an object")
    return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, Decimal)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _signal_reason(obj: dict[str, Any], flag: str) -> str:
    extra = sorted(set(obj) - {flag, "_reason"})
    if extra:
        raise _BadOutputError(f"unexpected field(s) beside {flag}: {', '.join(extra)}")
    if obj[flag] is not True:
        raise _BadOutputError(f"{flag} must be true, got {_json_type(obj[flag])}")
    reason = obj.get("_reason")
    if not isinstance(reason, str):
        raise _BadOutputError(f"{flag} needs a string _reason, got {_json_type(reason)}")
    return reason


def _amount_micros(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        raise _BadOutputError(f"usd_used must be a number, got {_json_type(value)}")
    amount = Decimal(value)
    if amount < 0:
        raise _BadOutputError("usd_used is negative")
    # Bound before scaling: 1e999999999 must not become a gigantic integer.
    if amount > Decimal(MAX_USD_USED_MICROS) / MICROS_PER_USD:
        raise _BadOutputError("usd_used is out of range")
    return usd_to_micros(amount)


def _timestamp(obj: dict[str, Any], name: str) -> dt.datetime:
    text = obj[name]
    if not isinstance(text, str):
        raise _BadOutputError(f"{name} must be a string, got {_json_type(text)}")
    try:
        moment = parse_iso8601(text)
    except (ValueError, OverflowError) as exc:
        raise _BadOutputError(
            f"{name} is not an ISO-8601 time with a timezone: {text[:64]!r}"
        ) from exc
    if moment.year < _MIN_YEAR:
        raise _BadOutputError(f"{name} is before {_MIN_YEAR}: {text[:64]!r}")
    return moment


def _parse(provider: str, stdout: bytes, fetched_at: dt.datetime) -> ObserverResult:
    obj = _decode(stdout)
    signals = [flag for flag in ("_unreachable", "_defer") if flag in obj]
    if len(signals) > 1:
        raise _BadOutputError("both _unreachable and _defer in output")
    if signals == ["_unreachable"]:
        reason = _signal_reason(obj, "_unreachable")
        return Unreachable(
            provider, clean_reason(reason, "observer reported unreachable"), fetched_at
        )
    if signals == ["_defer"]:
        reason = _signal_reason(obj, "_defer")
        return Deferred(provider, clean_reason(reason, "observer deferred"), fetched_at)
    extra = sorted(set(obj) - _SUCCESS_KEYS)
    if extra:
        raise _BadOutputError(f"unexpected field(s): {', '.join(extra)}")
    for name in ("usd_used", "billing_ts"):
        if name not in obj:
            raise _BadOutputError(f"missing field {name}")
    micros = _amount_micros(obj["usd_used"])
    billing_ts = _timestamp(obj, "billing_ts")
    server_ts = None if obj.get("server_ts") is None else _timestamp(obj, "server_ts")
    return Reading(provider, micros, billing_ts, server_ts, fetched_at)


def parse_observer_output(provider: str, stdout: bytes, fetched_at: dt.datetime) -> ObserverResult:
    """Interpret what an observer printed.

    ``server_ts`` may be absent or ``null``. An amount finer than a micro-dollar
    is rounded up (a reading never understates spend).

    Args:
        provider: the provider id the observer was run for.
        stdout: everything the observer printed.
        fetched_at: the local time the observer was started (timezone-aware).

    Returns:
        A ``Reading``, a ``Deferred``, or an ``Unreachable`` whose reason names
        what was wrong with the output.

    Raises:
        ValueError: ``provider`` or ``fetched_at`` is invalid (a caller's bug,
            never the observer's output).
    """
    _check_provider(provider)
    _check_aware("fetched_at", fetched_at)
    try:
        return _parse(provider, stdout, fetched_at)
    except _BadOutputError as exc:
        return Unreachable(provider, clean_reason(str(exc), "malformed output"), fetched_at)


def _ts_or_none(moment: dt.datetime | None) -> str | None:
    return None if moment is None else format_ts(moment)


def reading_payload(
    result: Reading | Unreachable | Deferred, *, source: str | None = None
) -> dict[str, Any]:
    """The ``budget.observation`` payload recording ``result``.

    Args:
        result: a reading or an unreachable observer.
        source: who took the reading (``verdict``, ``reconcile``, ``manual`` or
            ``poll``, the daemon's or ``ledger poll``'s periodic read of the bill);
            omitted from the payload when ``None``.

    Returns:
        A JSON-ready dict; money in integer micro-USD, times in the chain's format.

    Raises:
        ValueError: ``result`` is ``Deferred`` (a deferral writes nothing), or
            ``source`` is not one of ``SOURCES``.
    """
    if source is not None and source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if isinstance(result, Deferred):
        raise ValueError("a deferred observation is not recorded")
    payload: dict[str, Any]
    if isinstance(result, Reading):
        payload = {
            "provider": result.provider,
            "ok": True,
            "usd_used_micros": result.usd_used_micros,
            "billing_ts": format_ts(result.billing_ts),
            "server_ts": _ts_or_none(result.server_ts),
            "fetched_at": format_ts(result.fetched_at),
            "reason": None,
        }
    else:
        payload = {
            "provider": result.provider,
            "ok": False,
            "usd_used_micros": None,
            "billing_ts": None,
            "server_ts": None,
            "fetched_at": format_ts(result.fetched_at),
            "reason": result.reason,
        }
    if source is not None:
        payload["source"] = source
    return payload


def _payload_ts(payload: dict[str, Any], name: str) -> dt.datetime:
    return parse_ts(payload[name])


def result_from_payload(payload: dict[str, Any]) -> Reading | Unreachable:
    """The inverse of ``reading_payload`` (``source`` is not part of the result).

    Raises:
        ValueError: the payload is not a well-formed ``budget.observation`` payload.
    """
    if not isinstance(payload, dict):
        raise ValueError("observation payload must be an object")
    missing = sorted(_PAYLOAD_KEYS - set(payload))
    if missing:
        raise ValueError(f"observation payload lacks {', '.join(missing)}")
    extra = sorted(set(payload) - _PAYLOAD_KEYS - {"source"})
    if extra:
        raise ValueError(f"observation payload has unexpected {', '.join(extra)}")
    if "source" in payload and payload["source"] not in SOURCES:
        raise ValueError(f"observation payload has a bad source: {payload['source']!r}")
    ok = payload["ok"]
    fetched_at = _payload_ts(payload, "fetched_at")
    if ok is True:
        if payload["reason"] is not None:
            raise ValueError("a successful observation has no reason")
        server = payload["server_ts"]
        return Reading(
            provider=payload["provider"],
            usd_used_micros=payload["usd_used_micros"],
            billing_ts=_payload_ts(payload, "billing_ts"),
            server_ts=None if server is None else _payload_ts(payload, "server_ts"),
            fetched_at=fetched_at,
        )
    if ok is False:
        for name in ("usd_used_micros", "billing_ts", "server_ts"):
            if payload[name] is not None:
                raise ValueError(f"an unreachable observation has no {name}")
        return Unreachable(payload["provider"], payload["reason"], fetched_at)
    raise ValueError("observation payload field ok must be a boolean")
