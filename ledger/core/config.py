"""The configuration as typed values, validated from a plain mapping (SPEC §1).

``from_mapping`` takes the parsed ``ledger.toml`` and the environment and
returns a ``Config`` or raises ``ConfigError`` naming the key; there is no
silent fallback for a bad value.
"""

import datetime as dt
import json
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any, NamedTuple

from ledger.core.alerts import AlertRule, alert_settings
from ledger.core.budgets import Budget, parse_budgets
from ledger.core.console_config import ConsoleSettings, console_settings
from ledger.core.observation import PROVIDER_RE
from ledger.core.price_overrides import price_overrides
from ledger.core.prices import Rates
from ledger.core.proxy_config import ProxySettings, proxy_settings
from ledger.core.units import usd_to_micros
from ledger.errors import ConfigError

AGGREGATE = "aggregate"
_CRON_FIELD_RE = re.compile(r"^[A-Za-z0-9*/,-]+$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_CRON_FIELDS = 5
_MAX_MICROS = 2**53 - 1  # the largest integer RFC 8785 represents exactly
_CENTURY_DAYS = 36_500
_ZONE_RE = re.compile(r"^[A-Za-z0-9_+-]{1,64}(/[A-Za-z0-9_+-]{1,64}){0,3}$")
_URL_MAX = 4096
_IDENTIFIER_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

# kind of each key: cap, caps, pct, seconds, hours, hours_or_off, argv, providers, cron, days,
# store_url (a PostgreSQL URI or conninfo), identifier (a schema name)
_SCHEMA: dict[str, dict[str, str]] = {
    "usd": {
        "daily_cap": "cap",
        "provider_caps": "caps",
        "warn_pct": "pct",
        "reservation_ttl_seconds": "seconds",
        "day_timezone": "zone",
        "providers": "providers",
    },
    "billing": {
        "freshness_seconds": "seconds",
        "stale_halt_pct": "pct",
        "stale_seconds": "seconds",
        "provider_lag_seconds": "seconds",
        "clock_tolerance_seconds": "seconds",
        "poll_seconds": "seconds",
    },
    "observer": {"command": "argv", "timeout_seconds": "seconds", "env": "env_names"},
    "reconcile": {
        "interval_hours": "hours",
        "drift_threshold_pct": "pct",
        "providers": "providers",
    },
    "snapshot": {"cron": "cron", "keep_days": "days"},
    "chain": {
        "lock_timeout_seconds": "seconds",
        "verify_interval_hours": "hours_or_off",
        "idempotency_days": "days",
        "segment_entries": "count",
        "segment_days": "days",
    },
    "store": {"url": "store_url", "schema": "identifier"},
}
_STRUCTURED = {"caps", "argv", "providers", "env_names"}


class Config(NamedTuple):
    """Every setting of SPEC §1; money in micro-USD, percentages exact."""

    daily_cap_micros: int | None = None
    provider_caps_micros: dict[str, int] = {}  # noqa: RUF012 - never mutated
    warn_pct: Fraction = Fraction(90)
    reservation_ttl_seconds: int = 900
    day_timezone: str = "UTC"
    day_zone: dt.tzinfo = dt.UTC
    freshness_seconds: int = 300
    stale_halt_pct: Fraction = Fraction(75)
    stale_seconds: int = 900
    provider_lag_seconds: int = 300
    clock_tolerance_seconds: int = 60
    poll_seconds: int = 240
    observer_command: tuple[str, ...] | None = None
    observer_timeout_seconds: int = 30
    observer_env: tuple[str, ...] = ()
    interval_hours: Fraction = Fraction(6)
    drift_threshold_pct: Fraction = Fraction(5)
    reconcile_providers: tuple[str, ...] = (AGGREGATE,)
    snapshot_cron: str = "0 4 * * *"
    snapshot_keep_days: int = 30
    lock_timeout_seconds: int = 10
    verify_interval_hours: Fraction = Fraction(24)  # the daemon's full verification; 0: off
    idempotency_days: int = 35  # keys older than this leave the hot index (found in the chain)
    segment_entries: int = 1_000_000  # the open segment is sealed at this many entries,
    segment_days: int = 0  # or when its first entry is this many days old (0: never)
    expected_providers: tuple[str, ...] = ()  # usd.providers
    price_overrides: dict[str, Rates] = {}  # noqa: RUF012 - never mutated
    store_url: str | None = None
    store_schema: str = "ledger"
    budgets: tuple[Budget, ...] = ()
    alert_rules: tuple[AlertRule, ...] = ()
    alert_check_seconds: int = 10
    alert_timeout_seconds: int = 10
    proxy: ProxySettings = ProxySettings()
    console: ConsoleSettings = ConsoleSettings()


_FIELD_FOR = {
    ("usd", "daily_cap"): "daily_cap_micros",
    ("usd", "provider_caps"): "provider_caps_micros",
    ("usd", "warn_pct"): "warn_pct",
    ("usd", "reservation_ttl_seconds"): "reservation_ttl_seconds",
    ("usd", "day_timezone"): "day_timezone",
    ("usd", "providers"): "expected_providers",
    ("billing", "freshness_seconds"): "freshness_seconds",
    ("billing", "stale_halt_pct"): "stale_halt_pct",
    ("billing", "stale_seconds"): "stale_seconds",
    ("billing", "provider_lag_seconds"): "provider_lag_seconds",
    ("billing", "clock_tolerance_seconds"): "clock_tolerance_seconds",
    ("billing", "poll_seconds"): "poll_seconds",
    ("observer", "command"): "observer_command",
    ("observer", "timeout_seconds"): "observer_timeout_seconds",
    ("observer", "env"): "observer_env",
    ("reconcile", "interval_hours"): "interval_hours",
    ("reconcile", "drift_threshold_pct"): "drift_threshold_pct",
    ("reconcile", "providers"): "reconcile_providers",
    ("snapshot", "cron"): "snapshot_cron",
    ("snapshot", "keep_days"): "snapshot_keep_days",
    ("chain", "lock_timeout_seconds"): "lock_timeout_seconds",
    ("chain", "verify_interval_hours"): "verify_interval_hours",
    ("chain", "idempotency_days"): "idempotency_days",
    ("chain", "segment_entries"): "segment_entries",
    ("chain", "segment_days"): "segment_days",
    ("store", "url"): "store_url",
    ("store", "schema"): "store_schema",
}


def _number(value: Any, name: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{name}: must be a number")
    try:
        number = Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError) as exc:
        raise ConfigError(f"{name}: must be a number, got {value!r}") from exc
    return number


def _convert_key(kind: str, value: Any, name: str) -> Any:
    """A key's value, validated; ``usd.day_timezone`` by name only (see ``_day_zone``)."""
    if kind == "zone":
        if not isinstance(value, str) or not _ZONE_RE.fullmatch(value):
            raise ConfigError(f"{name}: must be an IANA time zone name such as Europe/Berlin")
        return value
    return _convert(kind, value, name)


def _env_names(value: Any, name: str) -> tuple[str, ...]:
    """``observer.env``: names of environment variables (possibly none)."""
    if not isinstance(value, list) or not all(
        isinstance(part, str) and _ENV_NAME_RE.fullmatch(part) for part in value
    ):
        raise ConfigError(f"{name}: must be an array of environment variable names")
    return tuple(value)


def _integer(value: Any, name: str, least: int) -> int:
    if isinstance(value, str) and re.fullmatch(r"\s*\d{1,30}\s*", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{name}: must be an integer ≥ {least}")
    return value


_CONVERTERS: dict[str, Callable[[Any, str], Any]] = {
    "count": lambda value, name: _integer(value, name, 1),
    "store_url": lambda value, name: _store_value("store_url", value, name),
    "identifier": lambda value, name: _store_value("identifier", value, name),
    "env_names": _env_names,
}


def _convert(kind: str, value: Any, name: str) -> Any:
    if kind == "cap":
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ConfigError(f"{name}: must be a number")
        try:
            micros = usd_to_micros(value)
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from exc
        if micros < 0:
            raise ConfigError(f"{name}: must be ≥ 0")
        if micros > _MAX_MICROS:
            raise ConfigError(f"{name}: must be ≤ {_MAX_MICROS / 1e6:.6f} (exact in the chain)")
        return micros
    if kind == "caps":
        if not isinstance(value, dict):
            raise ConfigError(f"{name}: must be a table of provider = USD")
        caps = {}
        for provider, cap in value.items():
            if not isinstance(provider, str) or not PROVIDER_RE.fullmatch(provider):
                raise ConfigError(f"{name}.{provider}: not a valid provider id")
            if provider == AGGREGATE:
                raise ConfigError(f"{name}.{provider}: use usd.daily_cap for the aggregate")
            caps[provider] = _convert("cap", cap, f"{name}.{provider}")
        return caps
    if kind == "pct":
        number = _number(value, name)
        if not 0 <= number <= 100:  # noqa: PLR2004
            raise ConfigError(f"{name}: must be a percentage in [0, 100]")
        return number
    if kind in {"seconds", "days"}:
        value = _integer(value, name, 0)
        # Beyond a century, date arithmetic overflows; no budget needs longer.
        limit = _CENTURY_DAYS if kind == "days" else _CENTURY_DAYS * 86_400
        if value > limit:
            raise ConfigError(f"{name}: must be ≤ {limit}")
        return value
    if kind in {"hours", "hours_or_off"}:
        number = _number(value, name)
        if number < 0 or (number == 0 and kind == "hours"):
            raise ConfigError(f"{name}: must be a number {'> 0' if kind == 'hours' else '≥ 0'}")
        return number
    if kind == "argv":
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(part, str) and part for part in value)
        ):
            raise ConfigError(f"{name}: must be a non-empty array of strings")
        return tuple(value)
    if kind == "providers":
        if not isinstance(value, list) or not value:
            raise ConfigError(f"{name}: must be a non-empty array of provider ids")
        for provider in value:
            if not isinstance(provider, str) or not PROVIDER_RE.fullmatch(provider):
                raise ConfigError(f"{name}: {provider!r} is not a valid provider id")
        return tuple(value)
    if (convert := _CONVERTERS.get(kind)) is not None:
        return convert(value, name)
    if kind == "cron":
        fields = value.split() if isinstance(value, str) else []
        if len(fields) != _CRON_FIELDS or not all(_CRON_FIELD_RE.fullmatch(f) for f in fields):
            raise ConfigError(f"{name}: must be a 5-field cron expression")
        return " ".join(fields)
    raise AssertionError(kind)  # pragma: no cover


def _store_value(kind: str, value: Any, name: str) -> str:
    """``store.url`` (a PostgreSQL URI or libpq conninfo) or ``store.schema`` (SPEC §8).

    The database itself is reached only by commands that need it.
    """
    if kind == "store_url":
        if not isinstance(value, str) or not value.strip() or len(value) > _URL_MAX:
            raise ConfigError(f"{name}: must be a PostgreSQL URI or conninfo string")
        text = value.strip()
        if "://" in text and not text.startswith(("postgresql://", "postgres://")):
            raise ConfigError(f"{name}: only postgresql:// URIs are supported")
        if "\n" in text or "\x00" in text:
            raise ConfigError(f"{name}: must be one line")
        return text
    if not isinstance(value, str) or not _IDENTIFIER_RE.fullmatch(value):
        raise ConfigError(f"{name}: must match ^[a-z_][a-z0-9_]{{0,62}}$")
    return value


def env_name(section: str, key: str) -> str:
    """The variable that overrides ``section.key``."""
    return f"LEDGER_{section}_{key}".upper()


ZoneLookup = Callable[[str], dt.tzinfo]
"""Finds an IANA zone by name (raises ``KeyError``, ``ValueError`` or ``OSError``)."""


def _day_zone(name: str, key: str, zones: ZoneLookup | None) -> dt.tzinfo:
    if name == "UTC":
        return dt.UTC
    if zones is None:
        raise ConfigError(f"{key}: {name!r}: no time zone database to find it in")
    try:
        return zones(name)
    except (KeyError, ValueError, OSError) as exc:
        raise ConfigError(f"{key}: {name!r} is not a known IANA time zone") from exc


def _json_overrides(environ: dict[str, str], values: dict[str, Any]) -> None:
    """The tables and arrays given as JSON in the environment: prices, alerts, budgets."""
    parsers: tuple[tuple[str, Callable[[Any], dict[str, Any]]], ...] = (
        ("LEDGER_PRICES", lambda v: {"price_overrides": price_overrides(v, "LEDGER_PRICES")}),
        ("LEDGER_ALERTS", lambda v: alert_settings(v, "LEDGER_ALERTS")),
        ("LEDGER_BUDGETS", lambda v: {"budgets": parse_budgets(v, "LEDGER_BUDGETS")}),
    )
    for variable, parse in parsers:
        if variable in environ:
            try:
                parsed = json.loads(environ[variable])
            except ValueError as exc:
                raise ConfigError(f"{variable}: must be JSON ({exc})") from exc
            values.update(parse(parsed))


def from_mapping(
    document: dict[str, Any], environ: dict[str, str], zones: ZoneLookup | None = None
) -> Config:
    """Validate the file's tables and the ``LEDGER_*`` overrides into a ``Config``.

    Args:
        document: the parsed ``ledger.toml`` (empty when there is none).
        environ: the process environment.
        zones: looks up ``usd.day_timezone`` (the time zone database is read at
            the edge); without it only ``"UTC"`` is known.

    Raises:
        ConfigError: an unknown section or key in the file, or a malformed or
            out-of-range value; the message names the key.
    """
    values: dict[str, Any] = {}
    # The gateway's table validates its own keys and LEDGER_PROXY_* overrides.
    values["proxy"] = proxy_settings(document.get("proxy"), environ)
    values["console"] = console_settings(document.get("console"), environ)
    for section, table in document.items():
        if section in {"proxy", "console"}:
            continue
        if section == "prices":
            values["price_overrides"] = price_overrides(table, "prices")
            continue
        if section == "budgets":
            values["budgets"] = parse_budgets(table, "budgets")
            continue
        if section == "alerts":
            values.update(alert_settings(table, "alerts"))
            continue
        if section not in _SCHEMA:
            raise ConfigError(f"ledger.toml: unknown section [{section}]")
        if not isinstance(table, dict):
            raise ConfigError(f"ledger.toml: {section} must be a table")
        for key, value in table.items():
            if key not in _SCHEMA[section]:
                raise ConfigError(f"ledger.toml: unknown key {section}.{key}")
            kind = _SCHEMA[section][key]
            values[_FIELD_FOR[section, key]] = _convert_key(kind, value, f"{section}.{key}")
    for section, keys in _SCHEMA.items():
        for key, kind in keys.items():
            variable = env_name(section, key)
            if variable not in environ:
                continue
            raw: Any = environ[variable]
            if kind in _STRUCTURED:
                try:
                    raw = json.loads(raw)
                except ValueError as exc:
                    raise ConfigError(f"{variable}: must be JSON ({exc})") from exc
            values[_FIELD_FOR[section, key]] = _convert_key(kind, raw, variable)
    _json_overrides(environ, values)
    for variable, field in (
        ("LEDGER_ALERTS_CHECK_SECONDS", "alert_check_seconds"),
        ("LEDGER_ALERTS_TIMEOUT_SECONDS", "alert_timeout_seconds"),
    ):
        if variable in environ:
            raw_seconds = environ[variable]
            if not raw_seconds.isdigit() or int(raw_seconds) < 1:
                raise ConfigError(f"{variable}: must be an integer ≥ 1")
            values[field] = int(raw_seconds)
    if "day_timezone" in values:
        variable = env_name("usd", "day_timezone")
        key = variable if variable in environ else "usd.day_timezone"
        values["day_zone"] = _day_zone(values["day_timezone"], key, zones)
    if values["console"].timezone is not None:
        _day_zone(values["console"].timezone, "console.timezone", zones)
    return Config(**values)
