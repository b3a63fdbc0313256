"""Derived state in PostgreSQL: the ``StateStore`` port for fleets (SPEC §8).

``derived_state`` holds one row: the folded state as JSON, bound to the head
(its row number, hash and end position) it reflects; ``idempotency_keys``
holds one row per key. Both are written through the chain's connection, so
inside a write transaction they change with the entry that changes them and
commit with it: the state never lags the chain it describes. The services'
checks still apply: a state that matches no prefix of the chain halts the
gate, and a missing one is rebuilt from the verified chain.
"""

import json
from typing import Any, NamedTuple

from ledger.core.state import STATE_FORMAT
from ledger.edges.pgdb import PgDatabase
from ledger.errors import ChainIOError, StateMismatchError


class PgStoredState(NamedTuple):
    """Derived state and the chain head it reflects."""

    head_hash: str | None
    size: int
    data: dict[str, Any]


def _dumps(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


class PgStateStore:
    """The derived-state row and the idempotency-key index of one schema."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def load(self) -> PgStoredState | None:
        """The stored state, or ``None`` when there is none.

        Raises:
            StateMismatchError: the row does not parse (edited).
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        memo = self.db.memo()
        if memo is not None and "state" in memo:
            row = memo.pop("state")  # read with the head, in this transaction
        else:
            rows = self.db.execute("SELECT head_hash, size, body FROM derived_state WHERE id = 1")
            row = rows[0] if rows else None
        if row is None:
            return None
        head_hash, size, body = row
        try:
            document = json.loads(bytes(body))
            if document["format"] != STATE_FORMAT:
                raise StateMismatchError("derived state has an unknown format")
            if document["head_hash"] != head_hash or int(document["size"]) != int(size):
                raise StateMismatchError("derived state row disagrees with itself (edited?)")
            return PgStoredState(head_hash, int(size), document["data"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StateMismatchError(f"derived state malformed: {exc}") from exc

    def save_state(self, head_hash: str | None, size: int, data: dict[str, Any]) -> None:
        """Replace the stored state (in the open transaction, if any).

        Raises:
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        body = _dumps({"format": STATE_FORMAT, "head_hash": head_hash, "size": size, "data": data})
        entries = int(data.get("meta", {}).get("entries", 0))
        memo = self.db.memo()
        if memo is not None:
            memo.pop("state", None)
        self.db.execute(
            "INSERT INTO derived_state (id, head_seq, head_hash, size, body)"
            " VALUES (1, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET"
            " head_seq = excluded.head_seq, head_hash = excluded.head_hash,"
            " size = excluded.size, body = excluded.body",
            (entries, head_hash, size, body),
        )

    def delete(self) -> None:
        """Remove the stored state and the key index (rebuilt from the chain on next use)."""
        memo = self.db.memo()
        if memo is not None:
            memo.pop("state", None)
        self.db.execute("DELETE FROM derived_state")
        self.db.execute("DELETE FROM idempotency_keys")

    def load_key(self, key: str) -> dict[str, Any] | None:
        """The index record of ``key``; ``None`` when absent or unreadable."""
        try:
            rows = self.db.execute("SELECT record FROM idempotency_keys WHERE key = %s", (key,))
        except ChainIOError:
            return None
        if not rows:
            return None
        try:
            record = json.loads(bytes(rows[0][0]))
        except ValueError:
            return None
        if not isinstance(record, dict) or record.get("key") != key:
            return None
        return record

    def save_keys(self, records: list[dict[str, Any]], *, replace: bool = False) -> None:
        """Add idempotency-key records; the first record of a key wins.

        Raises:
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        with self.db.transaction():
            if replace:
                self.db.execute("DELETE FROM idempotency_keys")
            for record in records:
                self.db.execute(
                    "INSERT INTO idempotency_keys (key, record) VALUES (%s, %s)"
                    " ON CONFLICT (key) DO NOTHING",
                    (record["key"], _dumps(record)),
                )
