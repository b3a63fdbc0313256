"""A fleet's gateway keys (SPEC §12), in the store's ``gateway_keys`` table: digests, never secrets.

Every host's ``keys issue``, ``keys list``, ``keys revoke-gateway`` and gateway
read the same rows, so a key issued on one host works at every host's
gateway and a revocation on one host is refused by all of them from their
next request on. A change runs in one transaction under an advisory lock of
its own (not the chain's), so two hosts issuing at once both land, and the
second to take the lock sees the first's key (a name is never issued twice).
"""

import secrets
from collections.abc import Callable

from ledger.core.gateway_keys import GatewayKey
from ledger.edges.postgres.db import PgDatabase, lock_key

KeyEdit = Callable[[list[GatewayKey]], list[GatewayKey]]

_SELECT = (
    "SELECT name, agent, tags, expires, created, revoked_at, sha256"
    " FROM gateway_keys ORDER BY created, name"
)
_INSERT = (
    "INSERT INTO gateway_keys (name, agent, tags, expires, created, revoked_at, sha256)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_UPDATE = (
    "UPDATE gateway_keys SET agent = %s, tags = %s, expires = %s,"
    " created = %s, revoked_at = %s, sha256 = %s WHERE name = %s"
)


class PgGatewayKeys:
    """The gateway keys of a fleet, kept in its database."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def load(self) -> list[GatewayKey]:
        """Every issued key, oldest first.

        Raises:
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        rows = self.db.execute(_SELECT)
        return [
            GatewayKey(
                str(name), agent, tuple(tags or ()), expires, str(created), revoked_at, str(digest)
            )
            for name, agent, tags, expires, created, revoked_at, digest in rows
        ]

    def change(self, edit: KeyEdit) -> None:
        """Replace the keys with ``edit(keys)``, in one transaction under the keys' lock.

        Raises:
            UsageError: as ``edit`` raises it (nothing is written).
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        with self.db.transaction():
            self.db.execute(
                "SELECT pg_advisory_xact_lock(%s)", (lock_key(self.db.schema, "gateway_keys"),)
            )
            before = {key.name: key for key in self.load()}
            after = {key.name: key for key in edit(list(before.values()))}
            for name in before.keys() - after.keys():
                self.db.execute("DELETE FROM gateway_keys WHERE name = %s", (name,))
            for name, key in after.items():
                if name not in before:
                    self.db.execute(_INSERT, _row(key))
                elif before[name] != key:
                    self.db.execute(_UPDATE, (*_row(key)[1:], name))

    @staticmethod
    def new_secret() -> str:
        """A fresh secret: ``lk_`` and 256 bits from the operating system."""
        return "lk_" + secrets.token_urlsafe(32)


def _row(key: GatewayKey) -> tuple[object, ...]:
    return (
        key.name, key.agent, list(key.tags), key.expires, key.created, key.revoked_at, key.digest,
    )  # fmt: skip
