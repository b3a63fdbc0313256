"""Reading ``ledger.toml`` with ``tomllib`` and the ``LEDGER_*`` overrides."""

import datetime as dt
import os
import tomllib
from pathlib import Path

from ledger.core.config import Config, from_mapping
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
    if data is None:
        document = {}
    else:
        try:
            document = tomllib.loads(data.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return from_mapping(document, environ, find_zone)


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
