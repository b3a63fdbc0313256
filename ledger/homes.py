"""Where a command's home is, and whether ``ledger init`` made it (SPEC §1)."""

import os
from pathlib import Path

from ledger.errors import NoHomeError, NotAHomeError

CONFIG_FILE = "ledger.toml"


def resolve_home(option: str | None, environ: dict[str, str] | None = None) -> Path:
    """``--home``, else ``$LEDGER_HOME``, else ``./.ledger`` (SPEC §1)."""
    found = (os.environ if environ is None else environ).get("LEDGER_HOME")
    return Path(option or found or ".ledger")


def check_home(home: Path) -> None:
    """Refuse a home that does not exist or that ``ledger init`` never made.

    A home has a ``ledger.toml`` or a ``keys/`` folder (``init`` writes both);
    any other existing directory is someone else's folder, and a command run
    there must write nothing into it.

    Raises:
        NoHomeError: there is no directory at ``home``.
        NotAHomeError: the directory holds neither ``ledger.toml`` nor ``keys/``.
    """
    if not home.is_dir():
        raise NoHomeError(home)
    if not (home / CONFIG_FILE).exists() and not (home / "keys").exists():
        raise NotAHomeError(home)
