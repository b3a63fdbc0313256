"""The fleet's pushed caps and budgets: the newest ``config.changed`` of the store (SPEC §21).

Read before anything else a command does on a fleet host, outside the chain
lock; the gate compares them under the lock with what the chain has sealed
(``services.gate.config_seal``), so a push racing a verdict halts that one
verdict rather than let it decide under stale caps. A copy is kept in the
home for when the store cannot be reached: verdicts then halt anyway, but
the figures they print and the records spooled meanwhile keep the fleet's
caps.
"""

import json
from pathlib import Path
from typing import Any

from ledger.core.sealed_config import CONFIG_CHANGED, SCOPE_FLEET
from ledger.edges.fileio import atomic_write, read_regular
from ledger.edges.postgres.db import PgDatabase
from ledger.edges.postgres.schemacheck import StoreSchemaError
from ledger.errors import StoreUnreachableError

_NEWEST_SQL = "SELECT line FROM chain WHERE event_type = %s ORDER BY seq DESC LIMIT 1"


def pushed_caps(database: PgDatabase, copy: Path) -> dict[str, Any] | None:
    """The ``after`` tables of the fleet's newest pushed ``config.changed``, or ``None``.

    Raises:
        ChainIOError: the store failed otherwise than by being unreachable.
    """
    try:
        rows = database.execute(_NEWEST_SQL, (CONFIG_CHANGED,))
    except StoreUnreachableError:
        return _kept(copy)
    except StoreSchemaError:
        return None  # no fleet yet (``ledger init`` makes it), or one this code cannot read
    if not rows:
        return None
    payload = json.loads(bytes(rows[0][0])).get("payload", {})
    if payload.get("scope") != SCOPE_FLEET or not isinstance(payload.get("after"), dict):
        return None
    after: dict[str, Any] = payload["after"]
    text = json.dumps(after, sort_keys=True).encode("utf-8")
    if _read(copy) != text:
        try:
            copy.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(copy, text)
        except OSError:
            pass  # a copy for bad days only: the store stays the source
    return after


def newest_sealed(database: PgDatabase) -> tuple[dict[str, Any] | None, bool]:
    """The ``after`` tables of the store's newest ``config.changed``, and whether pushed.

    Raises:
        StoreUnreachableError, ChainIOError: the store failed.
    """
    rows = database.execute(_NEWEST_SQL, (CONFIG_CHANGED,))
    if not rows:
        return None, False
    payload = json.loads(bytes(rows[0][0])).get("payload", {})
    after = payload.get("after")
    return (after if isinstance(after, dict) else None), payload.get("scope") == SCOPE_FLEET


def _read(copy: Path) -> bytes | None:
    try:
        return read_regular(copy)
    except OSError:
        return None


def _kept(copy: Path) -> dict[str, Any] | None:
    data = _read(copy)
    if data is None:
        return None
    try:
        kept = json.loads(data)
    except ValueError:
        return None
    return kept if isinstance(kept, dict) else None
