"""Caps and budgets as the chain seals them: the ``config.changed`` entry.

Every change of ``usd.*`` or ``[[budgets]]`` is sealed before the first
verdict decided under the new values, so an auditor sees when a cap was raised
and by whom. The sealed document has the shape of those ``ledger.toml``
tables (amounts and percentages as exact decimal text, never floats), so a
fleet's hosts read the pushed caps back through the same parser as a file.

A fleet's caps are those of its newest ``config.changed`` whose ``scope`` is
``"fleet"`` (``ledger config push``); a host's own ``ledger.toml`` then keeps
host settings only.
"""

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from ledger.core.budgets import Budget
from ledger.core.config import Config, from_mapping
from ledger.errors import ConfigError

CONFIG_CHANGED = "config.changed"
FLEET_SECTIONS = ("usd", "budgets")
"""The tables a fleet's store holds; every other table is the host's."""
SCOPE_FLEET = "fleet"
SCOPE_HOST = "host"
CONFIG_KEY = "config"
"""Where the derived state's ``meta`` keeps the newest sealed document and its scope."""

CAPS_SEEN = "caps_seen"
"""Where ``meta`` keeps the caps of a home's verdicts until its first sealed change."""

_MICROS_PER_USD = 1_000_000


def usd_decimal(micros: int) -> str:
    """Exact decimal USD text: ``50``, ``0.125``."""
    whole, fraction = divmod(micros, _MICROS_PER_USD)
    if not fraction:
        return str(whole)
    return f"{whole}.{fraction:06d}".rstrip("0")


def pct_decimal(value: Fraction) -> str:
    """A percentage as text the parser reads back exactly (``90``, ``22.5``, ``100/3``)."""
    if value.denominator == 1:
        return str(value.numerator)
    scaled = value * 1_000_000
    if scaled.denominator == 1:
        whole, fraction = divmod(int(scaled), 1_000_000)
        return f"{whole}.{fraction:06d}".rstrip("0")
    return str(value)


def _budget_table(budget: Budget) -> dict[str, Any]:
    table: dict[str, Any] = {
        "name": budget.name,
        "usd": usd_decimal(budget.cap_micros),
        "period": budget.period,
    }
    if budget.match:
        table["match"] = dict(budget.match)
    if budget.per is not None:
        table["per"] = budget.per
    if budget.warn_pct is not None:
        table["warn_pct"] = pct_decimal(budget.warn_pct)
    if budget.alert_pcts:
        table["alert_pcts"] = [pct_decimal(pct) for pct in budget.alert_pcts]
    if budget.usd_for:
        table["usd_for"] = {glob: usd_decimal(micros) for glob, micros in budget.usd_for}
    return table


def caps_document(config: Config) -> dict[str, Any]:
    """The ``usd`` and ``budgets`` tables ``config`` decides under, as sealed JSON."""
    usd: dict[str, Any] = {
        "warn_pct": pct_decimal(config.warn_pct),
        "reservation_ttl_seconds": config.reservation_ttl_seconds,
        "day_timezone": config.day_timezone,
    }
    if config.daily_cap_micros is not None:
        usd["daily_cap"] = usd_decimal(config.daily_cap_micros)
    if config.provider_caps_micros:
        usd["provider_caps"] = {
            provider: usd_decimal(micros)
            for provider, micros in sorted(config.provider_caps_micros.items())
        }
    if config.expected_providers:
        usd["providers"] = list(config.expected_providers)
    return {"usd": usd, "budgets": [_budget_table(budget) for budget in config.budgets]}


def sealed_document(state: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The newest sealed caps document in a derived state, and its scope."""
    found = state.get("meta", {}).get(CONFIG_KEY)
    if not isinstance(found, dict):
        return None, None
    document, scope = found.get("after"), found.get("scope")
    return (document if isinstance(document, dict) else None), (
        scope if isinstance(scope, str) else None
    )


def changed_payload(
    before: dict[str, Any] | None,
    after: dict[str, Any],
    scope: str,
    user: str,
    host: str,
) -> dict[str, Any]:
    """The ``config.changed`` payload: what was, what is, and who made it where."""
    return {"before": before, "after": after, "scope": scope, "user": user, "host": host}


def fold_config_changed(meta: dict[str, Any], payload: Mapping[str, Any]) -> None:
    """Remember the newest sealed document in the state's ``meta``."""
    meta[CONFIG_KEY] = {"after": payload.get("after"), "scope": payload.get("scope")}


def host_tables(document: Mapping[str, Any]) -> list[str]:
    """The fleet's tables that a host's own ``ledger.toml`` sets."""
    return [section for section in FLEET_SECTIONS if section in document]


def fleet_mapping(
    host_document: Mapping[str, Any], host_caps: dict[str, Any] | None, fleet: Mapping[str, Any]
) -> dict[str, Any]:
    """A fleet host's whole configuration: its own tables and the fleet's caps and budgets.

    ``host_caps`` is the caps document of the host's own file and environment
    when either sets ``[usd]``, ``[[budgets]]`` or their variables (else
    ``None``): accepted only when it says exactly what the fleet's does.

    Raises:
        ConfigError: the host sets caps or budgets other than the fleet's (a
            verdict would not know which to decide under).
    """
    if host_caps is not None and host_caps != fleet:
        raise ConfigError(
            "ledger.toml: [usd] or [[budgets]] here differ from this fleet's, which its store "
            "holds (`ledger config push`); remove them from this host's ledger.toml and "
            "LEDGER_USD_*/LEDGER_BUDGETS from its environment"
        )
    merged = {name: table for name, table in host_document.items() if name not in FLEET_SECTIONS}
    usd = fleet.get("usd")
    if isinstance(usd, dict):
        merged["usd"] = usd
    budgets = fleet.get("budgets")
    if isinstance(budgets, list) and budgets:
        merged["budgets"] = budgets
    return merged


def push_tables(document: Mapping[str, Any]) -> dict[str, Any]:
    """The tables of a file given to ``ledger config push``.

    Raises:
        ConfigError: the file has other tables (host settings stay on each
            host) or neither ``[usd]`` nor ``[[budgets]]``.
    """
    other = sorted(name for name in document if name not in FLEET_SECTIONS)
    if other:
        raise ConfigError(
            f"config push: [{other[0]}] is a host setting; the file may hold only [usd] "
            "and [[budgets]]"
        )
    if not document:
        raise ConfigError("config push: the file has neither [usd] nor [[budgets]]")
    return dict(document)


def with_sealed_caps(config: Config, state: Mapping[str, Any]) -> tuple[Config, bool]:
    """``config`` with the ``[usd]`` caps the chain had sealed by ``state`` (``explain``).

    Budgets stay those in force now (the state's budget counters are kept for
    them); a sealed day zone other than the one in force now is not taken
    either. Returns the configuration and whether sealed caps were used.
    """
    document, _scope = sealed_document(state)
    usd = None if document is None else document.get("usd")
    if not isinstance(usd, dict) or usd.get("day_timezone", "UTC") != config.day_timezone:
        return config, False

    def zone(_name: str) -> Any:
        return config.day_zone

    try:
        sealed = from_mapping({"usd": usd}, {}, zone)
    except ConfigError:
        return config, False
    return config._replace(
        daily_cap_micros=sealed.daily_cap_micros,
        provider_caps_micros=sealed.provider_caps_micros,
        warn_pct=sealed.warn_pct,
        reservation_ttl_seconds=sealed.reservation_ttl_seconds,
        expected_providers=sealed.expected_providers,
    ), True
