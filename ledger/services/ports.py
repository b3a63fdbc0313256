"""The small interfaces services need; edges satisfy them structurally.

A PostgreSQL chain for fleets would implement ``ChainStore`` (a row lock or an
advisory lock in place of ``flock``) without touching the core or the services.
"""

import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ledger.core.chain import ChainReport
    from ledger.core.checkpoint import Checkpoint
    from ledger.core.config import Config
    from ledger.core.trust import TrustStore


class Clock(Protocol):
    """Where the time comes from."""

    def now(self) -> dt.datetime:
        """The current time, timezone-aware."""
        ...


class Head(Protocol):
    """The chain's last entry as an append needs it."""

    @property
    def entry_hash(self) -> str:
        """The hash the next entry links to."""
        ...

    @property
    def ts_utc(self) -> str:
        """The last entry's sealed time."""
        ...

    @property
    def size(self) -> int:
        """A position after the last entry (bytes for files, rows for tables)."""
        ...


class ChainTx(Protocol):
    """The chain while its exclusive lock is held."""

    def head(self) -> Head | None:
        """The last entry, or ``None`` when the chain is empty."""
        ...

    def append(
        self,
        line: bytes,
        *,
        entry_hash: str | None = None,
        ts_utc: str | None = None,
        event_type: str | None = None,
    ) -> None:
        """Append one complete line durably (the sealed facts spare a re-parse)."""
        ...


class ChainStore(Protocol):
    """Append-only storage of chain lines with one exclusive lock."""

    def transaction(self) -> AbstractContextManager[ChainTx]:
        """Hold the lock for one read-decide-append step."""
        ...

    def read_transaction(self) -> AbstractContextManager[ChainTx]:
        """A read-only view that waits for writers and creates nothing."""
        ...

    def head(self) -> Head | None:
        """The last entry, read without the lock."""
        ...

    def exists(self) -> bool:
        """Whether the chain has been created."""
        ...

    def iter_lines(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Raw lines from position ``start``."""
        ...

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
        """Verify every line up to position ``end``, in parallel where the store allows.

        ``end`` is a head read before, without the lock: lines appended meanwhile
        are left for the next run.
        """
        ...

    def hash_of_entry(self, number: int, *, allow_markers: bool = False) -> str | None:
        """The hash of entry ``number`` (from 1)."""
        ...


SchemaLoader = Callable[[str], dict[str, Any]]


class StoredStateLike(Protocol):
    """What a state store returns."""

    @property
    def head_hash(self) -> str | None:
        """The chain head the state reflects."""
        ...

    @property
    def size(self) -> int:
        """The chain size the state reflects."""
        ...

    @property
    def data(self) -> dict[str, Any]:
        """The folded state."""
        ...


class StateStore(Protocol):
    """Where derived state is kept."""

    def load(self) -> StoredStateLike | None:
        """The stored state, or ``None``."""
        ...

    def save_state(self, head_hash: str | None, size: int, data: dict[str, Any]) -> None:
        """Replace the stored state."""
        ...

    def delete(self) -> None:
        """Remove the stored state."""
        ...

    def load_key(self, key: str) -> "dict[str, Any] | Sequence[EntryPosition] | None":
        """The index record of an idempotency key, or ``None``.

        A key that left the hot index (``chain.idempotency_days``) answers the
        positions of the entries that may hold it: the caller reads them.

        Raises:
            StateMismatchError: the index cannot answer for this key (it lost
                records or was edited): the caller searches the chain.
        """
        ...

    def save_keys(
        self,
        records: list[dict[str, Any]],
        *,
        replace: bool = False,
        refs: Iterable[tuple[str, int, int | None]] = (),
    ) -> None:
        """Add idempotency-key records (the first record of a key wins), and entry refs.

        ``replace`` drops every record first: the index is rebuilt from a full fold.
        ``refs`` are ``(entry_hash, line, byte offset)`` of entries folded.
        The index is derived state, kept with the counters and rebuilt from the
        chain with them: nothing in it is made durable on its own.
        """
        ...


class EntryPosition(Protocol):
    """Where an entry is in the chain."""

    @property
    def segment(self) -> int:
        """Its segment (0: the chain as one file)."""
        ...

    @property
    def entry(self) -> int:
        """Its line, from 1."""
        ...

    @property
    def offset(self) -> int | None:
        """Its byte offset, when known."""
        ...


class RefMatchLike(Protocol):
    """An entry found by a prefix of its hash."""

    @property
    def entry_hash(self) -> str:
        """The entry's whole hash."""
        ...

    @property
    def position(self) -> EntryPosition:
        """Where it is."""
        ...


class RefIndex(Protocol):
    """A store that finds entries by (a prefix of) their hash."""

    def find_refs(self, prefix: str, limit: int = 2) -> "Sequence[RefMatchLike]":
        """Indexed entries whose hash begins with ``prefix``."""
        ...


class CounterDeps(Protocol):
    """What loading the counter needs."""

    def schema(self, event_type: str) -> dict[str, Any]:
        """An event type's payload schema (raises when there is none)."""
        ...

    @property
    def chain(self) -> ChainStore:
        """The chain."""
        ...

    @property
    def states(self) -> StateStore:
        """The derived-state store."""
        ...

    @property
    def keys(self) -> "TrustSource":
        """Where the trust store comes from."""
        ...

    @property
    def config(self) -> "Config":
        """The configuration (``usd.day_timezone`` keys the fold's days)."""
        ...

    def newest_checkpoint(self) -> "Checkpoint | None":
        """The newest signed checkpoint of the chain."""
        ...


class TrustSource(Protocol):
    """Loads the trust store."""

    def load_trust(self) -> "TrustStore":
        """The trust store."""
        ...


class TranscriptReader(Protocol):
    """An open transcript."""

    @property
    def size(self) -> int:
        """Its length in bytes when it was opened."""
        ...

    def read_at(self, start: int, length: int) -> bytes:
        """Bytes from ``start``."""
        ...

    @property
    def partial(self) -> tuple[int, int, bool] | None:
        """After ``lines``: a last line without ``\\n``: (its start, end read, too long)."""
        ...

    def lines(
        self, offset: int, oversized_from: int | None = None
    ) -> Iterator[tuple[int, int, bytes | None]]:
        """Each complete line from ``offset``: (its start, its end, its bytes or ``None``).

        ``None``: a line too long to hold, skipped. ``oversized_from``: the
        line at ``offset`` is known too long, with no ``\\n`` before there.
        """
        ...


class TranscriptStore(Protocol):
    """Transcripts and the cursor kept for each."""

    def open(self, path: str) -> AbstractContextManager[TranscriptReader]:
        """The transcript at ``path``."""
        ...

    def load_cursor(self, key: str) -> dict[str, Any] | None:
        """The stored cursor, or ``None``."""
        ...

    def save_cursor(self, key: str, cursor: dict[str, Any]) -> None:
        """Replace the stored cursor."""
        ...

    def locked(self, key: str) -> AbstractContextManager[None]:
        """The cursor of ``key`` held for one reader or writer."""
        ...

    def subagents(self, path: str) -> list[str]:
        """The subagent transcripts of the session transcript at ``path``, in name order."""
        ...
