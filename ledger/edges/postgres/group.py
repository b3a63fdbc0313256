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
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ledger.errors import ChainIOError, LedgerError, StoreUnreachableError

if TYPE_CHECKING:
    import psycopg

    from ledger.edges.postgres.db import PgDatabase


# Values kept between the units of a group (see ``unit``).
_GROUP_MEMO = ("trust",)


class GroupCommitError(ChainIOError):
    """The group's transaction did not commit: nothing since its last durable point is stored."""


class PgGroup:
    """One batch of units in one database transaction under one hold of the chain lock."""

    def __init__(self, db: "PgDatabase") -> None:
        self._db = db
        self._conn: psycopg.Connection[Any] | None = None
        self._tx: Any = None
        self._newest: tuple[int, str] | None = None  # the last row appended since begin
        self.failure: LedgerError | None = None
        self.wrote = False  # the running unit has written
        self.on_durable: list[Callable[[], None]] = []

    @property
    def conn(self) -> "psycopg.Connection[Any] | None":
        """The connection the group's transaction runs on (``None`` between transactions)."""
        return self._conn

    def begin(self) -> None:
        """Open the group's transaction and take the chain's advisory lock.

        Raises:
            StoreUnreachableError, LockTimeoutError, ChainIOError: as a transaction would.
        """
        conn = self._db.connection()
        tx = conn.transaction()
        try:
            tx.__enter__()
            self._conn, self._tx = conn, tx
            self._db.lock_chain_on(conn)
            self._newest = None
        except Exception as exc:
            self._abandon(exc)
            raise self._db.translate(exc) from exc

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

    def appended(self, seq: int, entry_hash: str) -> None:
        """A unit appended this row (what a failed commit is looked up by)."""
        self._newest = (seq, entry_hash)

    def fail(self, why: LedgerError) -> None:
        """Nothing more of the group may commit: its units not yet durable run again."""
        if self.failure is None:
            self.failure = why

    def commit(self) -> None:
        """Commit the group's transaction; then every unit of it is durable.

        Raises:
            GroupCommitError: it did not commit (or that cannot be known).
        """
        if self.failure is not None or self._tx is None or self._conn is None:
            self._abandon(self.failure)
            raise GroupCommitError(
                f"the batch was not recorded: {self.failure or 'no transaction open'}"
            )
        tx, newest = self._tx, self._newest
        self._conn, self._tx = None, None
        try:
            tx.__exit__(None, None, None)
        except Exception as exc:
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
        self._abandon(None)

    def _abandon(self, why: BaseException | None) -> None:
        tx, self._tx, self._conn = self._tx, None, None
        if tx is not None:
            with contextlib.suppress(Exception):
                tx.__exit__(type(why) if why else ChainIOError, why or ChainIOError("abort"), None)

    def _landed(self, newest: tuple[int, str] | None) -> bool:
        """Whether the group's newest row is in the store after a commit that reported failure."""
        if newest is None:
            return False
        with contextlib.suppress(LedgerError):
            rows = self._db.execute("SELECT entry_hash FROM chain WHERE seq = %s", (newest[0],))
            return bool(rows) and rows[0][0] == newest[1]
        return False


@contextlib.contextmanager
def grouped(db: "PgDatabase", shared: Any) -> Iterator[PgGroup | None]:
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
def unit(db: "PgDatabase", group: PgGroup) -> Iterator["psycopg.Connection[Any]"]:
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
    # The trust store is changed only under the chain lock the group holds,
    # so what one unit read stays true for the next.
    shared.memo = {key: outer[key] for key in _GROUP_MEMO if key in outer}
    group.wrote = False
    kept = False
    try:
        yield conn
        kept = True
    finally:
        shared.depth -= 1
        inner, shared.memo = shared.memo, outer
        for key in _GROUP_MEMO:
            if kept and key in inner:
                outer[key] = inner[key]
            else:  # changed inside, or failed: read it again
                outer.pop(key, None)
        failed = conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        if failed or (not kept and group.wrote):
            group.fail(ChainIOError(f"store {db.display}: a decision failed half-way"))
    if failed:
        raise ChainIOError(f"store {db.display}: the transaction failed")
