"""A PostgreSQL database as the fleet's store: transactions and statements with bounded waits.

The connection is one per process and database
(``ledger.edges.postgres.connection``), and the schema's version is checked
once per connection (``ledger.edges.postgres.schemacheck``).

Every wait is bounded by ``chain.lock_timeout_seconds``: the connection
attempt (``connect_timeout``), each statement (``statement_timeout``), each
lock (``lock_timeout``, the advisory lock included) and, on TCP, unacknowledged
data (``tcp_user_timeout``). Errors become ``StoreUnreachableError`` (the
server cannot be reached or went away), ``LockTimeoutError`` (a wait ran out)
or ``ChainIOError`` (anything else, e.g. a missing privilege), each naming the
store without its password.
"""

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ledger.edges.postgres.connection import (
    LOCK_SQL,
    SharedConnection,
    first_line,
    lock_key,
    redact,
    shared_connection,
)
from ledger.edges.postgres.schemacheck import ensure_schema, refuse_without_schema
from ledger.errors import ChainIOError, LockTimeoutError, StoreUnreachableError

if TYPE_CHECKING:
    import psycopg

    from ledger.edges.postgres.group import PgGroup

_BACKOFF_FIRST = 1.0
_BACKOFF_MAX = 30.0


class PgDatabase:
    """A database and schema holding a fleet's chain, state and trust store."""

    def __init__(self, url: str, schema: str, timeout_seconds: int) -> None:
        self.url = url
        self.schema = schema
        self.timeout_seconds = timeout_seconds
        self.display = f"{redact(url)} (schema {schema})"
        self._shared = shared_connection(url, schema, timeout_seconds)

    @property
    def shared(self) -> SharedConnection:
        """This process's connection to the database, and what its transactions hold."""
        return self._shared

    # --- connecting -------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        wait_ms = max(1, self.timeout_seconds * 1000)
        idle_ms = max(60, 4 * self.timeout_seconds) * 1000
        options = (
            f"-c lock_timeout={wait_ms} -c statement_timeout={wait_ms + 1000} "
            f"-c idle_in_transaction_session_timeout={idle_ms} "
            f"-c search_path={self.schema} -c synchronous_commit=on"
        )
        return {
            "autocommit": True,
            # libpq treats 1 as 2; 0 would mean "wait forever".
            "connect_timeout": max(2, self.timeout_seconds),
            "application_name": "ledger",
            "options": options,
            "keepalives": 1,
            "keepalives_idle": max(1, self.timeout_seconds),
            "keepalives_interval": 1,
            "keepalives_count": 3,
            "tcp_user_timeout": wait_ms,
        }

    def listen_options(self) -> dict[str, Any]:
        """The options a connection of its own (a listener's) opens with."""
        return self._options()

    def _connection(self, *, check_schema: bool = True) -> "psycopg.Connection[Any]":
        import psycopg

        shared = self._shared
        if shared.pid != os.getpid():
            # A forked child never uses (or closes) its parent's socket.
            if shared.conn is not None:
                shared.abandoned.append(shared.conn)
            shared.conn, shared.pid, shared.checked = None, os.getpid(), False
        conn = shared.conn
        if conn is not None and not conn.closed and not conn.broken:
            if check_schema and not shared.checked:
                refuse_without_schema(self, conn)
            return conn
        shared.conn = None
        shared.checked = False
        if shared.failures and time.monotonic() < shared.retry_at:
            raise StoreUnreachableError(
                f"store {self.display} unreachable: {shared.last_error} (retrying later)"
            )
        try:
            conn = psycopg.connect(self.url, **self._options())
        except psycopg.Error as exc:
            shared.failures += 1
            delay = min(_BACKOFF_MAX, _BACKOFF_FIRST * 2 ** (shared.failures - 1))
            shared.retry_at = time.monotonic() + delay
            shared.last_error = first_line(exc)
            raise StoreUnreachableError(
                f"store {self.display} unreachable: {shared.last_error}"
            ) from exc
        shared.failures = 0
        shared.conn = conn
        if check_schema:
            refuse_without_schema(self, conn)
        return conn

    def translate(self, exc: BaseException) -> ChainIOError | LockTimeoutError:
        """A database error as the ``LedgerError`` a command reports."""
        import psycopg

        if not isinstance(exc, psycopg.Error):
            if isinstance(exc, ChainIOError | LockTimeoutError):
                return exc
            return ChainIOError(f"store {self.display}: {exc}")
        state = exc.sqlstate or ""
        conn = self._shared.conn
        if state in {"55P03", "57014"}:
            return LockTimeoutError(
                f"store {self.display}: waited longer than {self.timeout_seconds} s "
                f"({first_line(exc)})"
            )
        if (
            isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
            or state.startswith(("08", "57P"))
            or (conn is not None and (conn.closed or conn.broken))
        ):
            self._forget()
            return StoreUnreachableError(f"store {self.display} unreachable: {first_line(exc)}")
        return ChainIOError(f"store {self.display}: {first_line(exc)}")

    def _forget(self) -> None:
        shared = self._shared
        if shared.conn is not None:
            with contextlib.suppress(Exception):
                shared.conn.close()
        shared.conn = None
        shared.checked = False

    # --- using it -------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(
        self, *, read_only: bool = False, check_schema: bool = True
    ) -> Iterator["psycopg.Connection[Any]"]:
        """One transaction (joined when one is already open in this thread).

        ``read_only`` sees one snapshot of the database throughout
        (``REPEATABLE READ``) and takes no lock. A transaction the server has
        failed is never reported as committed.

        Raises:
            StoreUnreachableError: the database cannot be reached or went away.
            LockTimeoutError: a wait ran out.
            ChainIOError: any other database error.
        """
        import psycopg

        from ledger.edges.postgres.group import unit

        shared = self._shared
        with shared.lock:
            if shared.group is not None and shared.depth == 1:
                with unit(self, shared.group) as conn:
                    yield conn
                return
            if shared.depth > 0 and shared.conn is not None:
                yield shared.conn
                return
            conn = self._connection(check_schema=check_schema)
            try:
                with conn.transaction():
                    if read_only:
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    shared.depth += 1
                    shared.memo = {}
                    try:
                        yield conn
                    finally:
                        shared.depth -= 1
                        shared.memo = {}
                    status = conn.info.transaction_status
                    if status == psycopg.pq.TransactionStatus.INERROR:
                        raise ChainIOError(f"store {self.display}: the transaction failed")
            except psycopg.Error as exc:
                raise self.translate(exc) from exc

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (inside the open transaction, if any); its rows.

        Inside a group, the writes its units left pending go first, in the same
        round trip; a write other than those (a deletion, a checkpoint, a new
        trust store) makes the group read everything again.

        Raises:
            StoreUnreachableError, LockTimeoutError, ChainIOError: as ``transaction``.
        """
        shared = self._shared
        with shared.lock:
            group = shared.group
            if group is not None and shared.depth == 1:
                # Between a batch's units: a failed statement must not fail the group.
                with self.transaction():
                    return self.execute(sql, params)
            if group is not None and sql.lstrip()[:6].upper() != "SELECT":
                # (``recover`` also writes, through a function, but never in a batch.)
                group.wrote = True
                group.cache.clear()
            if shared.depth == 0:
                conn = self._connection()
            elif group is not None:
                conn = group.check()
            elif shared.conn is None or shared.conn.closed or shared.conn.broken:
                # Never on a new connection: it would hold neither the lock nor
                # what the transaction did before.
                raise StoreUnreachableError(
                    f"store {self.display} unreachable: the connection was lost mid-transaction"
                )
            else:
                conn = shared.conn
            try:
                if group is not None:
                    cursor = group.run(conn, sql, params)
                else:
                    cursor = conn.execute(sql, params)
                return cursor.fetchall() if cursor.description is not None else []
            except Exception as exc:
                raise self.translate(exc) from exc

    def write(self, sql: str, params: Sequence[Any], *, slot: str | None = None) -> None:
        """Run a write whose outcome nothing reads before the commit.

        Inside a group's unit it waits for the group's next statement or its
        commit and goes in the same round trip (held under the fleet-wide lock,
        every round trip counts); ``slot`` names a write that a later one of
        the same slot replaces (a row rewritten whole). Elsewhere it runs now.

        Raises:
            StoreUnreachableError, LockTimeoutError, ChainIOError: as ``transaction``.
        """
        shared = self._shared
        with shared.lock:
            group = shared.group
            if group is None or shared.depth < 2:  # noqa: PLR2004 - inside a unit
                self.execute(sql, params)
                return
            group.check()
            group.wrote = True
            group.defer(sql, tuple(params), slot)

    def group_cache(self) -> dict[str, Any] | None:
        """What the running group read or wrote under its hold of the lock (``None``: no group).

        Nobody else writes the chain while the group holds the lock, so a store
        object keeps here what the next unit would otherwise read again.
        """
        with self._shared.lock:
            group = self._shared.group
            return None if group is None else group.cache

    def memo(self) -> dict[str, Any] | None:
        """Values read once per transaction (``None`` outside one).

        A store object may keep here what it read inside the open transaction,
        so the next read in the same transaction costs no round trip.
        """
        shared = self._shared
        return shared.memo if shared.depth > 0 else None

    def stream(
        self, sql: str, params: Sequence[Any] = (), batch: int = 2000
    ) -> Iterator[tuple[Any, ...]]:
        """Rows of a query read through a server-side cursor, ``batch`` at a time.

        Raises:
            StoreUnreachableError, LockTimeoutError, ChainIOError: as ``transaction``.
        """
        with self.transaction() as conn:
            self._shared.cursors += 1
            try:
                if self._shared.group is not None:
                    self._shared.group.flush(conn)
                with conn.cursor(name=f"ledger_stream_{self._shared.cursors}") as cursor:
                    cursor.itersize = batch
                    cursor.execute(sql, params)
                    yield from cursor
            except Exception as exc:
                raise self.translate(exc) from exc

    def group(self) -> AbstractContextManager["PgGroup | None"]:
        """Run the block's transactions as one group (``ledger.edges.postgres.group``)."""
        from ledger.edges.postgres.group import grouped

        return grouped(self, self._shared)

    def group_released(self) -> AbstractContextManager[None]:
        """Outside the chain lock for the block, even between the units of a group."""
        from ledger.edges.postgres.group import released

        return released(self._shared)

    def connection(self) -> "psycopg.Connection[Any]":
        """This process's connection (opened when needed), outside any transaction.

        Raises:
            StoreUnreachableError, StoreSchemaError: as ``transaction``.
        """
        return self._connection()

    def appended(self, seq: int, entry_hash: str) -> None:
        """Note a row just inserted, for the group this process runs (if any)."""
        group = self._shared.group
        if group is not None:
            group.appended(seq, entry_hash)

    def lock_chain(self) -> None:
        """Take the chain's advisory lock until the transaction ends (SPEC §8).

        One writer at a time per schema, across every host; released by the
        commit or rollback, or by the server when the client dies. A group's
        transaction took it once for all its units.
        """
        if self._shared.group is None:
            self.execute(LOCK_SQL, (lock_key(self.schema),))

    # --- the schema -------------------------------------------------------------

    def ensure_schema(self) -> bool:
        """Create the schema when missing, or upgrade an older one; whether it was created.

        Raises:
            StoreSchemaError: the schema is newer than this code knows.
            StoreUnreachableError, LockTimeoutError, ChainIOError: as ``transaction``.
        """
        return ensure_schema(self)
