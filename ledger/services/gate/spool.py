"""Spend is never lost to an unreachable store (SPEC §8).

A ``record`` that cannot reach the database is kept in the home's spool (with
an idempotency key, one made up when the caller gave none) and reported as
spooled. The next write transaction this host opens first seals every
spooled record through the ordinary ``record`` path, keyed, so a record that
did reach the store before the connection broke is found there and never
counted twice; the spool file goes only after its record is in the store.
Until then this host's verdicts and ``usage`` count spooled spend as if it
were sealed.
"""

import copy
import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from ledger.core.state import apply_entry
from ledger.core.timefmt import format_ts, utc_day
from ledger.errors import LedgerError
from ledger.services.gate.record_outcome import RecordOutcome
from ledger.services.ports import ChainStore, ChainTx, Clock, Head

if TYPE_CHECKING:
    from ledger.core.chain import ChainReport
    from ledger.core.trust import TrustStore


class SpoolStore(Protocol):
    """Where spooled records wait."""

    def new_key(self) -> str:
        """A fresh idempotency key."""
        ...

    def pending(self) -> bool:
        """Whether any record is waiting."""
        ...

    def add(self, key: str, spooled_at: str, request: dict[str, Any]) -> bool:
        """Keep one record durably (``False``: its key is already waiting)."""
        ...

    def entries(self) -> list[dict[str, Any]]:
        """Every waiting record, oldest first."""
        ...

    def remove(self, key: str) -> None:
        """Forget a record the store now holds."""
        ...


class SpoolingChain:
    """A chain store whose write transactions first seal this host's spooled records.

    Read-only views never do: ``usage`` writes nothing.
    """

    def __init__(self, inner: ChainStore, spool: SpoolStore, drain: Callable[[], object]) -> None:
        self.inner = inner
        self.spool = spool
        self._drain = drain
        self._draining = False

    @property
    def path(self) -> object:
        """What messages call the chain."""
        return getattr(self.inner, "path", "the chain")

    def transaction(self) -> AbstractContextManager[ChainTx]:
        """Seal what is spooled (when the store answers), then the caller's transaction."""
        if not self._draining and self.spool.pending():
            self._draining = True
            try:
                self._drain()
            except LedgerError:
                pass  # the caller's own transaction reports what is wrong
            finally:
                self._draining = False
        return self.inner.transaction()

    def read_transaction(self) -> AbstractContextManager[ChainTx]:
        """See ``ChainStore``."""
        return self.inner.read_transaction()

    def head(self) -> Head | None:
        """See ``ChainStore``."""
        return self.inner.head()

    def exists(self) -> bool:
        """See ``ChainStore``."""
        return self.inner.exists()

    def iter_lines(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """See ``ChainStore``."""
        return self.inner.iter_lines(start, end)

    def verify(
        self,
        trust: "TrustStore",
        *,
        strict: bool = False,
        allow_markers: bool = False,
        workers: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        end: int | None = None,
    ) -> "ChainReport":
        """See ``ChainStore``."""
        return self.inner.verify(
            trust, strict=strict, allow_markers=allow_markers, workers=workers,
            progress=progress, end=end,
        )  # fmt: skip

    def hash_of_entry(self, number: int, *, allow_markers: bool = False) -> str | None:
        """See ``ChainStore``."""
        return self.inner.hash_of_entry(number, allow_markers=allow_markers)


class SpoolDeps(Protocol):
    """What spooling needs."""

    @property
    def clock(self) -> Clock:
        """The clock."""
        ...

    @property
    def spool(self) -> SpoolStore:
        """The home's spool."""
        ...


def spool_record(deps: SpoolDeps, request: dict[str, Any]) -> "RecordOutcome":
    """Keep a record that could not reach the store; it is sealed later, exactly once.

    Raises:
        ChainIOError: the spool file cannot be written (nothing was kept).
    """
    key = request.get("idempotency_key") or deps.spool.new_key()
    request = {**request, "idempotency_key": key}
    now = deps.clock.now()
    deps.spool.add(key, format_ts(now), request)
    payload = _payload(request, None, utc_day(now))
    return RecordOutcome("", payload["utc_day"], False, None, payload=payload, spooled=True)


def _payload(
    request: dict[str, Any], reservation: dict[str, Any] | None, day: str
) -> dict[str, Any]:
    details = request.get("details") or {}
    return {
        "provider": request["provider"],
        "actual_micros": request["actual_micros"],
        "utc_day": reservation["utc_day"] if reservation is not None else day,
        "verdict_ref": request.get("verdict_ref"),
        "settled": reservation is not None,
        "model_id": request.get("model_id"),
        "cycle_id": request.get("cycle_id"),
        "input_tokens": request.get("input_tokens"),
        "output_tokens": request.get("output_tokens"),
        "idempotency_key": request.get("idempotency_key"),
        **details,
    }


def with_spooled(deps: object, data: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    """The USD state with this host's spooled records folded in (a copy; never saved).

    Without spooled records it is ``data["usd"]`` itself.
    """
    spool: SpoolStore | None = getattr(deps, "spool", None)
    if spool is None or not spool.pending():
        usd: dict[str, Any] = data["usd"]
        return usd
    folded = copy.deepcopy(data)
    config = getattr(deps, "config", None)
    zone = config.day_zone if config is not None else dt.UTC  # days as the fold keys them
    for document in spool.entries():
        request = document["request"]
        ref = request.get("verdict_ref")
        live = folded["usd"]["reservations"].get(ref) if ref else None
        if live is not None and live["expires_at"] <= format_ts(now):
            live = None
        day = utc_day(now)
        try:
            spooled_at = str(document["spooled_at"])
            day = spooled_at[:10]
        except (KeyError, TypeError):
            spooled_at = format_ts(now)
        payload = _payload(request, live, day)
        apply_entry(
            folded, "budget.record_call", spooled_at, payload, f"spooled-{document['key']}", zone
        )
    result: dict[str, Any] = folded["usd"]
    return result
