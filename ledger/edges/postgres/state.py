"""Derived state in PostgreSQL: the ``StateStore`` port for fleets (SPEC §8).

``derived_state`` holds one row: the folded state as JSON, bound to the head
(its row number, hash and end position) it reflects; ``idempotency_keys``
holds one row per key. Both are written through the chain's connection, so
inside a write transaction they change with the entry that changes them and
commit with it: the state never lags the chain it describes. The services'
checks still apply: a state that matches no prefix of the chain halts the
gate, and a missing one is rebuilt from the verified chain.

Each body ends in an HMAC-SHA256 under the hosts' shared secret
(``ledger.edges.postgres.fleetsecret``), as the file store's state ends in one under
the home's key: a row changed by SQL, by anyone without a host's secret, no
longer matches and halts the gate (``counter_inconsistent``); a key record
that does not match is no record at all, so a forged one cannot pass a new
call off as a repeat. A host without the secret cannot read the state, and
says why.
"""

import hmac
import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from ledger.core.state import STATE_FORMAT
from ledger.edges.postgres.db import PgDatabase
from ledger.edges.postgres.fleetsecret import FleetSecret, mac
from ledger.errors import ChainIOError, KeyFileError, StateMismatchError

_STATE_LABEL = b"derived state"
_KEY_LABEL = b"idempotency key"


class PgStoredState(NamedTuple):
    """Derived state and the chain head it reflects."""

    head_hash: str | None
    size: int
    data: dict[str, Any]


def _dumps(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


class PgStateStore:
    """The derived-state row and the idempotency-key index of one schema."""

    def __init__(self, db: PgDatabase, secret: FleetSecret) -> None:
        self.db = db
        self.secret = secret

    def _not_the_fleets(self) -> str:
        return (
            f"cannot check the derived state: {self.secret.path} is not this fleet's "
            "secret; copy keys/fleet.secret from a host of this fleet"
        )

    def _sealed(self, label: bytes, body: bytes) -> bytes:
        try:
            secret = self.secret.require()
        except KeyFileError as exc:
            raise ChainIOError(str(exc)) from exc
        return body + b"\n" + mac(secret, label, body)

    def _opened(self, label: bytes, sealed: bytes) -> bytes | None:
        """The body of a sealed value, ``None`` when its MAC does not match.

        Raises:
            KeyFileError: this host has no usable secret.
        """
        secret = self.secret.require()
        body, _, found = sealed.rpartition(b"\n")
        return body if hmac.compare_digest(mac(secret, label, body), found) else None

    def load(self) -> PgStoredState | None:
        """The stored state, or ``None`` when there is none.

        Raises:
            StateMismatchError: the row does not match its MAC or does not parse
                (edited), or this host has no copy of the fleet's secret, or
                another one.
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        cache = self.db.group_cache()
        memo = self.db.memo()
        if cache is not None and "state" in cache:
            row = cache["state"]  # read with the head, or saved, under this hold of the lock
        elif memo is not None and "state" in memo:
            row = memo.pop("state")  # read with the head, in this transaction
        else:
            rows = self.db.execute("SELECT head_hash, size, body FROM derived_state WHERE id = 1")
            row = rows[0] if rows else None
        if row is None:
            # Rebuilt from the chain next, and saved under this host's secret:
            # only with the fleet's, or the other hosts would all halt.
            try:
                secret = self.secret.require()
            except KeyFileError as exc:
                raise StateMismatchError(f"cannot keep derived state: {exc}") from exc
            if self.secret.differs_from_fleet(secret):
                raise StateMismatchError(self._not_the_fleets())
            return None
        head_hash, size, sealed = row
        try:
            body = self._opened(_STATE_LABEL, bytes(sealed))
        except KeyFileError as exc:
            raise StateMismatchError(f"cannot check the derived state: {exc}") from exc
        if body is None:
            secret = self.secret.require()
            if self.secret.differs_from_fleet(secret):
                raise StateMismatchError(self._not_the_fleets())
            raise StateMismatchError("derived state does not match its MAC (edited?)")
        try:
            document = json.loads(body)
            if document["format"] != STATE_FORMAT:
                raise StateMismatchError("derived state has an unknown format")
            if document["head_hash"] != head_hash or int(document["size"]) != int(size):
                raise StateMismatchError("derived state row disagrees with itself (edited?)")
            return PgStoredState(head_hash, int(size), document["data"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StateMismatchError(f"derived state malformed: {exc}") from exc

    def save_state(self, head_hash: str | None, size: int, data: dict[str, Any]) -> None:
        """Replace the stored state (in the open transaction, if any), MAC'd.

        Raises:
            ChainIOError: this host has no usable fleet secret.
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        body = self._sealed(
            _STATE_LABEL,
            _dumps({"format": STATE_FORMAT, "head_hash": head_hash, "size": size, "data": data}),
        )
        entries = int(data.get("meta", {}).get("entries", 0))
        memo = self.db.memo()
        if memo is not None:
            memo.pop("state", None)
        # In a group, only the last unit's state is sent, with the commit.
        self.db.write(
            "INSERT INTO derived_state (id, head_seq, head_hash, size, body)"
            " VALUES (1, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET"
            " head_seq = excluded.head_seq, head_hash = excluded.head_hash,"
            " size = excluded.size, body = excluded.body",
            (entries, head_hash, size, body),
            slot="state",
        )
        cache = self.db.group_cache()
        if cache is not None:
            cache["state"] = (head_hash, size, body)

    def delete(self) -> None:
        """Remove the stored state and the key index (rebuilt from the chain on next use)."""
        memo = self.db.memo()
        if memo is not None:
            memo.pop("state", None)
        self.db.execute("DELETE FROM derived_state")
        self.db.execute("DELETE FROM idempotency_keys")

    def load_key(self, key: str) -> dict[str, Any] | None:
        """The index record of ``key``; ``None`` when absent or unreadable."""
        known = self._keys_known()
        if known is not None and key in known:
            sealed = known[key]  # read or written under this group's hold of the lock
        else:
            try:
                rows = self.db.execute("SELECT record FROM idempotency_keys WHERE key = %s", (key,))
            except ChainIOError:
                return None
            sealed = bytes(rows[0][0]) if rows else None
            if known is not None:
                known[key] = sealed
        if sealed is None:
            return None
        try:
            body = self._opened(_KEY_LABEL, sealed)
            record = None if body is None else json.loads(body)
        except (KeyFileError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("key") != key:
            return None
        return record

    def save_keys(
        self,
        records: list[dict[str, Any]],
        *,
        replace: bool = False,
        refs: Iterable[tuple[str, int, int | None]] = (),
    ) -> None:
        """Add idempotency-key records; the first genuine record of a key wins.

        ``refs`` (entry positions) are not kept here: the rows are the positions.

        A row already there whose MAC does not match (planted by SQL before the
        real record) is replaced, or a retry of that call would find no record
        and be counted again.

        Raises:
            ChainIOError: this host has no usable fleet secret.
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        del refs  # the chain's rows are numbered: positions need no index here
        with self.db.transaction():
            if replace:
                self.db.execute("DELETE FROM idempotency_keys")
            known = self._keys_known()
            stored: dict[str, bytes | None] = {}
            if not replace and records:
                wanted = [record["key"] for record in records]
                unknown = [key for key in wanted if known is None or key not in known]
                if unknown:
                    rows = self.db.execute(
                        "SELECT key, record FROM idempotency_keys WHERE key = ANY(%s)", (unknown,)
                    )
                    stored = dict.fromkeys(unknown)
                    stored.update({key: bytes(raw) for key, raw in rows})
                if known is not None:
                    stored.update({key: known[key] for key in wanted if key in known})
            kept = {key for key, raw in stored.items() if raw is not None and self._genuine(raw)}
            for record in records:
                if record["key"] in kept:
                    continue
                kept.add(record["key"])
                sealed = self._sealed(_KEY_LABEL, _dumps(record))
                self.db.write(
                    "INSERT INTO idempotency_keys (key, record) VALUES (%s, %s)"
                    " ON CONFLICT (key) DO UPDATE SET record = excluded.record",
                    (record["key"], sealed),
                )
                known = self._keys_known()
                if known is not None:
                    known[record["key"]] = sealed

    def _keys_known(self) -> dict[str, bytes | None] | None:
        """Key rows (``None``: no row) read or written in the running group, if any."""
        cache = self.db.group_cache()
        if cache is None:
            return None
        known: dict[str, bytes | None] = cache.setdefault("keys", {})
        return known

    def _genuine(self, sealed: bytes) -> bool:
        try:
            return self._opened(_KEY_LABEL, sealed) is not None
        except KeyFileError as exc:
            raise ChainIOError(str(exc)) from exc
