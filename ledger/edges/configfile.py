"""Reading ``ledger.toml`` with ``tomllib`` and the ``LEDGER_*`` overrides."""

import datetime as dt
import os
import tomllib
from pathlib import Path
from typing import Any

from ledger.core.config import Config, from_mapping
from ledger.core.sealed_config import caps_document, fleet_mapping, host_tables
from ledger.edges.fileio import read_regular
from ledger.edges.memo import remembered
from ledger.errors import ConfigError


def load_config(path: Path, environ: dict[str, str] | None = None) -> Config:
    """The home's configuration: environment over file over defaults.

    A missing file means defaults (``usd.daily_cap`` then has none).

    Raises:
        ConfigError: the file is unreadable or not TOML, or a value is invalid.
    """
    environ = dict(os.environ) if environ is None else environ
    try:
        data: bytes | None = read_regular(path)  # never blocks on a FIFO
    except FileNotFoundError:
        data = None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    # Only LEDGER_* variables shape a Config (``core.config.env_name``).
    overrides = tuple(sorted((k, v) for k, v in environ.items() if k.startswith("LEDGER_")))
    return remembered(
        "config", (str(path), data, overrides), lambda: _parse(path, data, dict(overrides))
    )


def _parse(path: Path, data: bytes | None, environ: dict[str, str]) -> Config:
    return from_mapping(_document(path, data), environ, find_zone)


def _document(path: Path, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {}
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's tables (``ledger config push FILE``).

    Raises:
        ConfigError: the file is unreadable or not TOML.
    """
    try:
        data = read_regular(path)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    return _document(path, data)


def load_fleet_config(
    path: Path, fleet: dict[str, Any], environ: dict[str, str] | None = None
) -> Config:
    """A fleet host's configuration: its ``ledger.toml`` and the store's pushed caps.

    Raises:
        ConfigError: the host's file or its environment sets caps or budgets
            other than the fleet's, or a value is invalid.
    """
    environ = dict(os.environ) if environ is None else environ
    host = load_config(path, environ)
    try:
        data: bytes | None = read_regular(path)
    except FileNotFoundError:
        data = None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    document = _document(path, data)
    overriding = any(name.startswith("LEDGER_USD_") or name == "LEDGER_BUDGETS" for name in environ)
    host_caps = caps_document(host) if host_tables(document) or overriding else None
    return from_mapping(fleet_mapping(document, host_caps, fleet), environ, find_zone)


def caps_from_tables(tables: dict[str, Any]) -> dict[str, Any]:
    """The caps document of ``[usd]`` and ``[[budgets]]`` tables, validated (``config push``).

    Raises:
        ConfigError: a value is invalid.
    """
    return caps_document(from_mapping(tables, {}, find_zone))


def find_zone(name: str) -> dt.tzinfo:
    """The IANA zone ``name`` from the system's time zone database (``usd.day_timezone``).

    Raises:
        KeyError: no such zone.
        ValueError: not a zone name (a path, say).
        OSError: the database could not be read.
    """
    import zoneinfo  # only a configured zone pays for it

    try:
        return zoneinfo.ZoneInfo(name)
    except zoneinfo.ZoneInfoNotFoundError as exc:
        raise KeyError(name) from exc
