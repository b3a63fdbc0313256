"""The ``[console]`` table: where the console listens, how long a sign-in lasts, its zone.

``console.listen`` left out means the daemon starts no console (``ledger
console`` then listens on 127.0.0.1:8788). An address other machines reach
needs TLS: either the console's own certificate (``tls_certfile`` and
``tls_keyfile``) or ``behind_proxy = true`` for a TLS reverse proxy in front.
"""

import json
from typing import Any, NamedTuple

from ledger.core.proxy_config import ListenAddress, parse_listen
from ledger.core.tls_config import TLS_KEYS, check_tls_pair, clear_text_beyond_loopback, tls_path
from ledger.errors import ConfigError

DEFAULT_CONSOLE_LISTEN = "127.0.0.1:8788"
_MAX_SESSION_HOURS = 24 * 366
_KEYS = ("listen", "session_hours", "timezone", *TLS_KEYS, "behind_proxy")


class ConsoleSettings(NamedTuple):
    """The console's settings; ``timezone`` ``None`` means ``usd.day_timezone``."""

    listen: str | None = None
    session_hours: float = 12.0
    timezone: str | None = None
    tls_certfile: str | None = None
    tls_keyfile: str | None = None
    behind_proxy: bool = False


def _convert(key: str, value: Any, name: str) -> Any:
    if key == "listen":
        return str(parse_listen(value, name))
    if key == "session_hours":
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{name}: must be a number of hours > 0")
        if not 0 < value <= _MAX_SESSION_HOURS:
            raise ConfigError(f"{name}: must be a number of hours in (0, {_MAX_SESSION_HOURS}]")
        return float(value)
    if key == "behind_proxy":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
            return value.strip().lower() == "true"
        raise ConfigError(f"{name}: must be true or false")
    if key in TLS_KEYS:
        return tls_path(value, name)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name}: must be a non-empty string")
    return value


def console_settings(table: Any, environ: dict[str, str]) -> ConsoleSettings:
    """The ``[console]`` table (``None`` when absent) with its ``LEDGER_CONSOLE_*`` overrides.

    Raises:
        ConfigError: an unknown key, or a malformed or out-of-range value; names the key.
    """
    values: dict[str, Any] = {}
    if table is not None:
        if not isinstance(table, dict):
            raise ConfigError("ledger.toml: console must be a table")
        for key, value in table.items():
            if key not in _KEYS:
                raise ConfigError(f"ledger.toml: unknown key console.{key}")
            values[key] = _convert(key, value, f"console.{key}")
    for key in _KEYS:
        variable = f"LEDGER_CONSOLE_{key.upper()}"
        if variable in environ:
            values[key] = _convert(key, environ[variable], variable)
    settings = ConsoleSettings(**values)
    check_tls_pair(settings.tls_certfile, settings.tls_keyfile, "console")
    return settings


def console_address(settings: ConsoleSettings, given: str | None) -> ListenAddress:
    """Where the console listens: ``--listen``, else ``console.listen``, else the default.

    Raises:
        ConfigError: malformed, or reachable from other machines without TLS
            files or ``console.behind_proxy``.
    """
    name = "--listen" if given is not None else "console.listen"
    address = parse_listen(given or settings.listen or DEFAULT_CONSOLE_LISTEN, name)
    if clear_text_beyond_loopback(address, settings.tls_certfile) and not settings.behind_proxy:
        raise ConfigError(
            f"{name}: {address} is reachable from other machines; the console listens there "
            "only over TLS (console.tls_certfile and console.tls_keyfile) or behind a TLS "
            "reverse proxy (console.behind_proxy = true)"
        )
    return address
