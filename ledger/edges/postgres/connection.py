"""One process's connection to a fleet's database, shared by every store object on it.

One connection per process and database, shared by every store object built
on it (the chain, the derived state, the trust store), so that what a command
does under the chain lock is one transaction. A long-lived process (the
daemon) keeps that connection; when it breaks, the next use reconnects, and
after a failed attempt the next one waits out a backoff (1 s doubling to
30 s), so a one-shot command never waits for the same dead server twice.
"""

import contextlib
import hashlib
import os
import re
import threading
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    import psycopg

    from ledger.errors import LedgerError

_PASSWORD_RE = re.compile(r"(://[^:/@]*:)[^@]*@|(password\s*=\s*)(\S+)", re.IGNORECASE)


def redact(url: str) -> str:
    """The store's address without its password, for messages."""
    return _PASSWORD_RE.sub(
        lambda m: f"{m.group(1)}***@" if m.group(1) else f"{m.group(2)}***", url
    )


LOCK_SQL = "SELECT pg_advisory_xact_lock(%s)"


def lock_key(schema: str, what: str = "chain") -> int:
    """The advisory-lock key of one schema's chain (a signed 64-bit integer)."""
    digest = hashlib.sha256(f"ledger:{schema}:{what}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def first_line(exc: BaseException) -> str:
    """The first line of an error's text (a server's message can run to several)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class OpenBatch(Protocol):
    """A batch's transaction (``ledger.edges.postgres.group.PgGroup``), as its users see it."""

    wrote: bool
    cache: dict[str, Any]

    def check(self) -> "psycopg.Connection[Any]":
        """The batch's open connection; raises what broke the batch, if anything did."""
        ...

    def defer(self, sql: str, params: tuple[Any, ...], slot: str | None) -> None:
        """Hold a unit's write until the next statement or the commit."""
        ...

    def run(
        self, conn: "psycopg.Connection[Any]", sql: str, params: "Sequence[Any]"
    ) -> "psycopg.Cursor[Any]":
        """Run ``sql`` after the writes still held, in one round trip; its cursor."""
        ...

    def flush(self, conn: "psycopg.Connection[Any]") -> None:
        """Send the writes held so far."""
        ...

    def appended(self, seq: int, entry_hash: str) -> None:
        """A unit appended this row."""
        ...

    def fail(self, why: "LedgerError") -> None:
        """Nothing more of the batch may commit."""
        ...


class SharedConnection:
    """One process's connection to one database, and what its reconnects remember."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.conn: psycopg.Connection[Any] | None = None
        self.pid = 0
        self.depth = 0
        self.failures = 0
        self.retry_at = 0.0
        self.last_error: str | None = None
        self.checked = False
        self.cursors = 0
        self.memo: dict[str, Any] = {}
        self.abandoned: list[Any] = []
        self.group: OpenBatch | None = None  # a batch's transaction open at depth 1


_SHARED: dict[tuple[str, str, int], SharedConnection] = {}
_SHARED_LOCK = threading.Lock()


def shared_connection(url: str, schema: str, timeout_seconds: int) -> SharedConnection:
    """This process's connection state for one database, schema and timeout."""
    with _SHARED_LOCK:
        return _SHARED.setdefault((url, schema, timeout_seconds), SharedConnection())


def close_all() -> None:
    """Close every connection this process holds (a daemon stopping; tests between cases)."""
    with _SHARED_LOCK:
        for shared in _SHARED.values():
            with shared.lock:
                if shared.conn is not None and shared.pid == os.getpid():
                    with contextlib.suppress(Exception):
                        shared.conn.close()
                shared.conn, shared.checked, shared.failures = None, False, 0
        _SHARED.clear()
