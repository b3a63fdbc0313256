"""Changing one value in ``ledger.toml`` and keeping everything else as written.

``tomlkit`` keeps comments, order and layout; the edited text is parsed again
as the home reads it before it replaces the file, so an edit never leaves a
configuration the next command refuses.
"""

import stat
import tomllib
from pathlib import Path
from typing import Any

from ledger.core.config import from_mapping
from ledger.edges.configfile import find_zone
from ledger.edges.fileio import atomic_write, read_regular
from ledger.errors import ConfigError


def _budget_table(document: Any, path: Path, budget: str) -> Any:
    tables = document.get("budgets")
    for table in tables if isinstance(tables, list) else []:
        if isinstance(table, dict) and table.get("name") == budget:
            return table
    raise ConfigError(f"{path}: no [[budgets]] table named {budget!r}; nothing written")


def set_usd_for(path: Path, budget: str, value: str, usd: float, environ: dict[str, str]) -> None:
    """Give ``value`` its own cap in budget ``budget``'s ``usd_for``, ahead of every glob.

    An entry for ``value`` already there is replaced (and moved first).

    Raises:
        ConfigError: the file cannot be read, is not TOML, has no such budget,
            or the edited configuration would not load; nothing is written then.
        ChainIOError: the file cannot be replaced.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        raw = read_regular(path)
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        document = tomlkit.parse(raw.decode("utf-8"))
    except (TOMLKitError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    table = _budget_table(document, path, budget)
    entries = tomlkit.inline_table()
    entries[value] = usd
    for glob, cap in (table.get("usd_for") or {}).items():
        if glob != value:
            entries[glob] = cap
    table["usd_for"] = entries
    text = tomlkit.dumps(document)
    try:
        from_mapping(tomllib.loads(text), environ, find_zone)
    except (tomllib.TOMLDecodeError, ConfigError) as exc:
        raise ConfigError(f"{path}: the edited configuration would not load ({exc})") from exc
    # A linked ledger.toml stays a link: the file it points to is replaced.
    atomic_write(path.resolve(), text.encode("utf-8"), mode)
