"""Group commit on the database: many decisions in one transaction, one commit.

A commit waits for the database's WAL flush, so one transaction per decision
caps a fleet's gateways at the server's commit rate. A batch of work (the
gateway's, ``ledger serve``'s) instead runs inside one group: one transaction
that takes the chain's advisory lock once, each unit of work in turn in
the group's transaction, and one commit at the end, before any result is
handed back. A unit's effects are all or nothing: one that fails after it
wrote (or leaves the transaction failed) fails the group, whose units not yet
durable then run again one by one, each in a transaction of its own. Units
that fail before writing (most refusals are not failures at all: a halt is a
verdict like any other) cost the group nothing.

The fleet-wide lock is held from its grant to the end of the commit, and every
round trip in between (each a wake-up of the server and of this process, on a
loaded host several times the statement itself) keeps every other host
waiting. So a group spends as few as it can: taking the lock and reading what
every decision starts from (the head, the derived state, the newest
checkpoint, the trust store) is one round trip; later units take those from
what earlier ones read or wrote (``cache``: nobody else writes while the lock
is held); a unit's writes (its row, the key index, the state, rewritten whole
once per group) are held and sent with the group's next statement or its
commit, in the same round trip. A write that fails there fails the group, as
it would have failed its unit.

A unit that must wait on something slow outside the store (a verdict that runs
the UsageObserver) lets other hosts in meanwhile (``released``): the group
commits what it holds so far, which frees the fleet-wide lock, and begins
again after the wait. What was committed then is durable; ``on_durable`` hooks
tell the caller so, and only units after it can be lost with a failed commit.

When a commit fails, whether it took effect is looked up (the newest row the
group appended, by its sequence number and hash): found, the group succeeded;
missing or unknowable, ``GroupCommitError`` says that nothing since the last
durable point is in the store, and the caller runs those units again, each in
its own transaction (a record is spooled and sealed once by its key then).
"""

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ledger.errors import ChainIOError, LedgerError, StoreUnreachableError

if TYPE_CHECKING:
    import psycopg

    from ledger.edges.postgres.connection import OpenBatch
    from ledger.edges.postgres.handle import PgHandle


class GroupCommitError(ChainIOError):
    """The group's transaction did not commit: nothing since its last durable point is stored."""


class PgGroup:
    """One batch of units in one database transaction under one hold of the chain lock."""

    def __init__(self, db: "PgHandle") -> None:
        self._db = db
        self._conn: psycopg.Connection[Any] | None = None
        self._newest: tuple[int, str] | None = None  # the last row appended since begin
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        self._slots: dict[str, tuple[str, tuple[Any, ...]]] = {}
        self.failure: LedgerError | None = None
        self.wrote = False  # the running unit has written
        self.on_durable: list[Callable[[], None]] = []
        # What the group read or wrote since it took the lock (``PgDatabase.group_cache``).
        self.cache: dict[str, Any] = {}

    @property
    def conn(self) -> "psycopg.Connection[Any] | None":
        """The connection the group's transaction runs on (``None`` between transactions)."""
        return self._conn

    def begin(self) -> None:
        """Open the group's transaction, take the chain's advisory lock, read what decisions read.

        One round trip: the lock and the rows every decision starts from
        (``ledger.edges.postgres.reads``), read once the lock is granted.

        Raises:
            StoreUnreachableError, LockTimeoutError, ChainIOError: as a transaction would.
        """
        from ledger.edges.postgres.connection import LOCK_SQL, lock_key
        from ledger.edges.postgres.reads import AT_GROUP_START

        conn = self._db.connection()
        try:
            with conn.pipeline():
                conn.execute("BEGIN")
                conn.execute(LOCK_SQL, (lock_key(self._db.schema),))
                cursors = [(sql, conn.execute(sql)) for sql in AT_GROUP_START]
            read = {sql: cursor.fetchall() for sql, cursor in cursors}
        except Exception as exc:
            _roll_back(conn)
            raise self._db.translate(exc) from exc
        self._conn, self._newest = conn, None
        self._pending, self._slots = [], {}
        self.cache = {"read": read}

    def check(self) -> "psycopg.Connection[Any]":
        """The group's open connection; raises what broke the group, if anything did.

        Raises:
            StoreUnreachableError, LockTimeoutError, ChainIOError: the group failed before.
        """
        conn = self._conn
        if self.failure is not None:
            raise self.failure
        if conn is None or conn.closed or conn.broken:
            self.failure = StoreUnreachableError(
                f"store {self._db.display} unreachable: the connection was lost mid-batch"
            )
            raise self.failure
        return conn

    def defer(self, sql: str, params: tuple[Any, ...], slot: str | None) -> None:
        """Hold a unit's write until the next statement or the commit (``PgDatabase.write``)."""
        if slot is None:
            self._pending.append((sql, params))
        else:
            self._slots[slot] = (sql, params)

    def run(
        self, conn: "psycopg.Connection[Any]", sql: str, params: Sequence[Any]
    ) -> "psycopg.Cursor[Any]":
        """Run ``sql`` after the writes still held, in one round trip; its cursor.

        A failure there fails the group: the held writes were earlier units'.
        """
        writes = self._take_writes()
        if not writes:
            return conn.execute(sql, params)
        try:
            with conn.pipeline():
                for write in writes:
                    conn.execute(*write)
                cursor = conn.execute(sql, params)
        except Exception as exc:
            self.fail(self._db.translate(exc))
            raise
        return cursor

    def flush(self, conn: "psycopg.Connection[Any]") -> None:
        """Send the writes still held (before a statement that does not go through ``run``)."""
        writes = self._take_writes()
        if not writes:
            return
        try:
            with conn.pipeline():
                for write in writes:
                    conn.execute(*write)
        except Exception as exc:
            self.fail(self._db.translate(exc))
            raise

    def _take_writes(self) -> list[tuple[str, tuple[Any, ...]]]:
        writes = self._pending + list(self._slots.values())
        self._pending, self._slots = [], {}
        return writes

    def appended(self, seq: int, entry_hash: str) -> None:
        """A unit appended this row (what a failed commit is looked up by)."""
        self._newest = (seq, entry_hash)

    def fail(self, why: LedgerError) -> None:
        """Nothing more of the group may commit: its units not yet durable run again."""
        if self.failure is None:
            self.failure = why

    def commit(self) -> None:
        """Send the writes still held and commit, in one round trip; then every unit is durable.

        Raises:
            GroupCommitError: it did not commit (or that cannot be known).
        """
        conn, newest = self._conn, self._newest
        if self.failure is not None or conn is None:
            self._abandon()
            raise GroupCommitError(
                f"the batch was not recorded: {self.failure or 'no transaction open'}"
            )
        writes = self._take_writes()
        self._conn, self.cache = None, {}
        try:
            with conn.pipeline():
                for write in writes:
                    conn.execute(*write)
                done = conn.execute("COMMIT")
            if done.statusmessage != "COMMIT":  # the server rolled a failed transaction back
                raise ChainIOError(f"the commit answered {done.statusmessage}")
        except Exception as exc:
            _roll_back(conn)
            if not self._landed(newest):
                raise GroupCommitError(
                    f"the batch was not recorded: {self._db.translate(exc)}"
                ) from exc
        for hook in self.on_durable:
            hook()

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        """Outside the fleet-wide lock for the block: commit so far, begin again after.

        A failure to commit or to begin again is kept, not raised: the block
        still runs, every later unit of the group fails as it would on its
        own, and the group's final commit reports it.
        """
        if self.failure is None:
            try:
                self.commit()
            except GroupCommitError as exc:
                self.failure = exc
        try:
            yield
        finally:
            if self.failure is None:
                try:
                    self.begin()
                except LedgerError as exc:
                    self.failure = exc

    def abort(self) -> None:
        """Roll the group's transaction back (the batch itself raised)."""
        self._abandon()

    def _abandon(self) -> None:
        conn, self._conn, self.cache = self._conn, None, {}
        self._pending, self._slots = [], {}
        if conn is not None:
            _roll_back(conn)

    def _landed(self, newest: tuple[int, str] | None) -> bool:
        """Whether the group's newest row is in the store after a commit that reported failure."""
        if newest is None:
            return False
        with contextlib.suppress(LedgerError):
            rows = self._db.execute("SELECT entry_hash FROM chain WHERE seq = %s", (newest[0],))
            return bool(rows) and rows[0][0] == newest[1]
        return False


def _roll_back(conn: "psycopg.Connection[Any]") -> None:
    """End a transaction that must not commit (nothing, when the connection is gone)."""
    if not conn.closed and not conn.broken:
        with contextlib.suppress(Exception):
            conn.execute("ROLLBACK")


@contextlib.contextmanager
def grouped(db: "PgHandle", shared: Any) -> Iterator[PgGroup | None]:
    """Run the block's transactions on ``db`` as one group (``shared``: its connection's state).

    Yields ``None``, and changes nothing, inside a transaction already open.

    Raises:
        StoreUnreachableError, LockTimeoutError, ChainIOError: the group could not begin.
        GroupCommitError: it did not commit; nothing since its last durable point is stored.
    """
    with shared.lock:
        if shared.depth > 0 or shared.group is not None:
            yield None
            return
        group = PgGroup(db)
        group.begin()
        shared.group, shared.depth, shared.memo = group, 1, {}
        try:
            yield group
        except BaseException:
            group.abort()
            raise
        finally:
            shared.group, shared.depth, shared.memo = None, 0, {}
        group.commit()


@contextlib.contextmanager
def released(shared: Any) -> Iterator[None]:
    """Outside the chain lock for the block, even between the units of a group."""
    with shared.lock:
        group = shared.group
        if group is None or shared.depth != 1:
            yield
            return
        shared.group, shared.depth, shared.memo = None, 0, {}
        try:
            with group.released():
                yield
        finally:
            shared.group, shared.depth, shared.memo = group, 1, {}


@contextlib.contextmanager
def unit(db: "PgHandle", group: "OpenBatch") -> Iterator["psycopg.Connection[Any]"]:
    """One unit of a group, in the group's transaction.

    No savepoint (two more round trips each, under the fleet-wide lock): a
    unit that fails after it wrote, or leaves the transaction failed, fails
    the whole group instead, and the units not yet durable run again one
    by one, each all or nothing in its own transaction.
    """
    import psycopg

    conn = group.check()
    shared = db.shared
    outer = shared.memo
    shared.depth += 1
    # What the units read in common is kept in the group's cache instead.
    shared.memo = {}
    group.wrote = False
    kept = False
    try:
        yield conn
        kept = True
    finally:
        shared.depth -= 1
        shared.memo = outer
        failed = conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        if failed or (not kept and group.wrote):
            group.fail(ChainIOError(f"store {db.display}: a decision failed half-way"))
    if failed:
        raise ChainIOError(f"store {db.display}: the transaction failed")
