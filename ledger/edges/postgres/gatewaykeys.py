"""A fleet's gateway keys (SPEC §12), in the store's ``gateway_keys`` table: digests, never secrets.

Every host's ``keys issue``, ``keys list``, ``keys revoke-gateway`` and gateway
read the same rows, so a key issued on one host works at every host's
gateway and a revocation on one host is refused by all of them from their
next request on. A change runs in one transaction under an advisory lock of
its own (not the chain's), so two hosts issuing at once both land, and the
second to take the lock sees the first's key (a name is never issued twice).

Each row carries an HMAC under the hosts' fleet secret, as the derived state
does: a row added or changed by SQL, by anyone without the secret, would
otherwise be a working key. A row that fails its check stops every use of the
keys (the gateway refuses, `keys list` names the row) until an operator
removes it.
"""

import hmac
import json
import secrets
from collections.abc import Callable

from ledger.core.gateway_keys import GatewayKey
from ledger.edges.postgres.connection import lock_key
from ledger.edges.postgres.db import PgDatabase
from ledger.edges.postgres.fleetsecret import FleetSecret, mac
from ledger.errors import KeyFileError

_LABEL = b"gateway-key"

KeyEdit = Callable[[list[GatewayKey]], list[GatewayKey]]

_SELECT = (
    "SELECT name, agent, tags, expires, created, revoked_at, sha256, role, mac"
    " FROM gateway_keys ORDER BY created, name"
)
_INSERT = (
    "INSERT INTO gateway_keys (name, agent, tags, expires, created, revoked_at, sha256, role,"
    " mac) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
_UPDATE = (
    "UPDATE gateway_keys SET agent = %s, tags = %s, expires = %s,"
    " created = %s, revoked_at = %s, sha256 = %s, role = %s, mac = %s WHERE name = %s"
)


class PgGatewayKeys:
    """The gateway keys of a fleet, kept in its database."""

    def __init__(self, db: PgDatabase, secret: FleetSecret) -> None:
        self.db = db
        self.secret = secret

    def load(self) -> list[GatewayKey]:
        """Every issued key, oldest first.

        Raises:
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        rows = self.db.execute(_SELECT)
        secret = self.secret.require()
        keys = []
        for name, agent, tags, expires, created, revoked_at, digest, role, row_mac in rows:
            key = GatewayKey(
                str(name), agent, tuple(tags or ()), expires, str(created), revoked_at,
                str(digest), role,
            )  # fmt: skip
            if not hmac.compare_digest(str(row_mac).encode("ascii"), _mac(secret, key)):
                raise KeyFileError(
                    f"gateway key {key.name!r} in the fleet's database fails its integrity "
                    "check (changed outside ledger): remove that row, then issue the key again"
                )
            keys.append(key)
        return keys

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
            secret = self.secret.require()
            for name, key in after.items():
                row = (*_row(key), key.role, _mac(secret, key).decode("ascii"))
                if name not in before:
                    self.db.execute(_INSERT, row)
                elif before[name] != key:
                    self.db.execute(_UPDATE, (*row[1:], name))

    @staticmethod
    def new_secret() -> str:
        """A fresh secret: ``lk_`` and 256 bits from the operating system."""
        return "lk_" + secrets.token_urlsafe(32)


def _row(key: GatewayKey) -> tuple[object, ...]:
    """The row's columns before ``role`` (the fields every version's MAC covers)."""
    return (
        key.name, key.agent, list(key.tags), key.expires, key.created, key.revoked_at, key.digest,
    )  # fmt: skip


def _mac(secret: bytes, key: GatewayKey) -> bytes:
    """The row's HMAC: every field, as canonical JSON, under the fleet secret.

    A console key's role is covered too (a row whose role was set or cleared by
    SQL fails its check); a gateway key's MAC is the one it had before roles.
    """
    fields = [*_row(key), *([] if key.role is None else [key.role])]
    body = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return mac(secret, _LABEL, body)
