"""Appending events: seal under the chain lock with the active writer key."""

import datetime as dt
from typing import Any, Protocol

from ledger.core.seal import SealedEntry, seal, seal_time
from ledger.core.signing import Signer
from ledger.core.timefmt import clock_in_range, format_ts
from ledger.core.trust import TrustStore
from ledger.errors import ClockRangeError, KeyFileError
from ledger.services.chain.requests import current_request
from ledger.services.chain.sealed_here import remember
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

    def pinned_root(self) -> bytes | None:
        """The offline root key the home pins, if any."""
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
        """The active writer key, as the trust store names it now.

        The trust store is read on every call, so a key rotated by another
        process is picked up; the private key file is read only when the active
        key changes.

        Raises:
            KeyFileError: no usable key.
            InputDataError: the trust store is unreadable.
        """
        return self._signer_in(self.deps.keys.load_trust())

    def _signer_in(self, trust: TrustStore) -> Signer:
        cached = self._signer
        if cached is not None and any(
            key.key_id == cached.key_id and key.valid_until is None and key.signs
            for key in trust.keys
        ):
            return cached
        self._signer = self.deps.keys.active_signer(trust)
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

        Call it with the chain lock held; without ``signer`` the active key is
        looked up under that lock, so a concurrent rotation is never raced.

        Raises:
            TornTailError: the chain ends in a torn line.
            ChainIOError: the append failed (nothing was left behind).
            SchemaValidationError: the payload does not match its schema.
            KeyFileError: no usable writer key.
            ClockRangeError: the entry's time is outside what the chain can hold.
        """
        head = tx.head()
        moment = seal_time(now or self.deps.clock.now(), head.ts_utc if head else None)
        if not clock_in_range(moment):
            # Never sealed: folding such an entry would overflow date arithmetic.
            raise ClockRangeError(
                f"cannot seal at {format_ts(moment)}: outside what the chain can hold", moment
            )
        trust = self.deps.keys.load_trust()  # once: the key is chosen and checked in one view
        chosen = signer if signer is not None else self._signer_in(trust)
        problem = trust.signing_problem(chosen.key_id, moment)
        if problem is not None:
            raise KeyFileError(f"{problem}: nothing sealed; see `ledger keys --help`")
        request = current_request()
        if request is not None:
            # A served request's entries carry its id, so a retry of it finds them.
            payload = {**payload, "request_id": request.request_id}
        sealed = seal(
            event_type,
            payload,
            self.deps.schema(event_type),
            moment=moment,
            prev_hash=head.entry_hash if head else None,
            signer=chosen,
        )
        tx.append(
            sealed.line, entry_hash=sealed.entry_hash, ts_utc=sealed.ts_utc, event_type=event_type
        )
        remember(sealed.line)
        # A file chain seals its open segment at its limit; other stores have no such step.
        seal_if_due = getattr(tx, "seal_if_due", None)
        if seal_if_due is not None:
            seal_if_due(chosen)
        if request is not None:
            request.sealed.add(sealed.entry_hash)
        return sealed

    def append_one(self, event_type: str, payload: dict[str, Any]) -> SealedEntry:
        """Take the lock, append one event, release.

        Raises:
            LockTimeoutError: the lock was busy too long.
            ChainIOError: see ``append``.
        """
        if self._signer is None:
            # Fail before taking the lock when there is no usable key; a key
            # that worked before is checked again under the lock anyway.
            self.signer()
        with self.deps.chain.transaction() as tx:
            return self.append(tx, event_type, payload)
