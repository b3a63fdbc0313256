"""Appending events: seal under the chain lock with the active writer key."""

import datetime as dt
from typing import Any, Protocol

from ledger.core.seal import SealedEntry, seal, seal_time
from ledger.core.signing import Signer
from ledger.core.trust import TrustStore
from ledger.services.ports import ChainStore, ChainTx, Clock


class KeyStore(Protocol):
    """Writer keys and the trust store."""

    def load_trust(self) -> TrustStore:
        """The trust store."""
        ...

    def save_trust(self, store: TrustStore, root: Signer | None = None) -> None:
        """Replace the trust store."""
        ...

    def active_signer(self, trust: TrustStore) -> Signer:
        """The key that signs new entries."""
        ...

    def generate(self) -> Signer:
        """Make and store a new key."""
        ...


class WriterDeps(Protocol):
    """What appending needs."""

    @property
    def clock(self) -> Clock:
        """The clock."""
        ...

    @property
    def chain(self) -> ChainStore:
        """The chain."""
        ...

    @property
    def keys(self) -> KeyStore:
        """The keys."""
        ...

    def schema(self, event_type: str) -> dict[str, Any]:
        """An event type's schema."""
        ...


class Writer:
    """Seals events into the chain; caches the key across appends of one process."""

    __slots__ = ("_signer", "deps")

    def __init__(self, deps: WriterDeps) -> None:
        self.deps = deps
        self._signer: Signer | None = None

    def signer(self) -> Signer:
        """The active writer key.

        Raises:
            KeyFileError: no usable key.
            InputDataError: the trust store is unreadable.
        """
        if self._signer is None:
            self._signer = self.deps.keys.active_signer(self.deps.keys.load_trust())
        return self._signer

    def append(
        self,
        tx: ChainTx,
        event_type: str,
        payload: dict[str, Any],
        *,
        now: dt.datetime | None = None,
        signer: Signer | None = None,
    ) -> SealedEntry:
        """Seal ``payload`` and append it inside an open transaction.

        Raises:
            TornTailError: the chain ends in a torn line.
            ChainIOError: the append failed (nothing was left behind).
            SchemaValidationError: the payload does not match its schema.
            KeyFileError: no usable writer key.
        """
        head = tx.head()
        moment = seal_time(now or self.deps.clock.now(), head.ts_utc if head else None)
        sealed = seal(
            event_type,
            payload,
            self.deps.schema(event_type),
            moment=moment,
            prev_hash=head.entry_hash if head else None,
            signer=signer or self.signer(),
        )
        tx.append(sealed.line)
        return sealed

    def append_one(self, event_type: str, payload: dict[str, Any]) -> SealedEntry:
        """Take the lock, append one event, release.

        Raises:
            LockTimeoutError: the lock was busy too long.
            ChainIOError: see ``append``.
        """
        signer = self.signer()
        with self.deps.chain.transaction() as tx:
            return self.append(tx, event_type, payload, signer=signer)
