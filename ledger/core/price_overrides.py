"""Price overrides from ``ledger.toml``'s ``[prices]`` tables or ``LEDGER_PRICES``."""

from typing import Any

from ledger.core.observation import PROVIDER_RE
from ledger.core.prices import PriceError, Rates
from ledger.core.rate_tables import rates_from
from ledger.errors import ConfigError

_PRICE_KEYS = frozenset(
    {
        "input_per_mtok",
        "output_per_mtok",
        "cache_read_per_mtok",
        "cache_write_per_mtok",
        "cache_write_1h_per_mtok",
    }
)
_MODEL_MAX = 256


def price_overrides(value: Any, name: str) -> dict[str, Rates]:
    """``[prices."<provider>/<model>"]`` tables (SPEC §7), USD per million tokens.

    Raises:
        ConfigError: a malformed key, an unknown rate, a missing input or
            output rate, or a rate that is not a number ≥ 0; names the key.
    """
    if not isinstance(value, dict):
        raise ConfigError(f'{name}: must be a table of "<provider>/<model>" tables')
    overrides = {}
    for key, table in value.items():
        provider, _, model = str(key).partition("/")
        where = f'{name}."{key}"'
        if not PROVIDER_RE.fullmatch(provider) or not model or len(model) > _MODEL_MAX:
            raise ConfigError(f'{where}: must be named "<provider>/<model>"')
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: must be a table of rates")
        for rate in table:
            if rate not in _PRICE_KEYS:
                raise ConfigError(f"{where}.{rate}: unknown key")
        try:
            overrides[key] = rates_from(table, prefix=f"{where}.", suffix="_per_mtok")
        except PriceError as exc:
            raise ConfigError(str(exc)) from exc
    return overrides
