"""One group-commit batch runner, for the resident gate (``ledger serve``) and the gateway.

Both decide many callers' work at once. One fsync each would cap them at the
disk's fsync rate, so a batch of work runs inside one group commit on the
home's chain (``ledger.edges.files.groupcommit``): one lock hold, each unit of
work in its own transaction in arrival order, one fsync at the end, and no
result handed back before it. Derived state stays in memory between batches
(``ledger.edges.files.keptstate``) and is written after a batch's fsync at most
every half second, and when the process stops; a process that writes it
between its batches instead (the gateway: ``write_while_idle``) leaves the
batches to write it only once it is ``OVERDUE_SECONDS`` old.

If the group's fsync fails, nothing of the batch was handed back and its
entries are gone again: derived state written meanwhile is dropped (it is
rebuilt from the chain), the caller forgets what it noted for the batch, and
the batch runs again with each transaction making itself durable.

On a fleet's database the batch is one database transaction under one hold of
the fleet-wide chain lock, its units in turn, and one commit
(``ledger.edges.postgres.group``). If that commit fails, or a unit fails after
it wrote, the batch runs again one by one as on a file.

Either store may make part of a batch durable early: a unit that runs the
UsageObserver first lets the chain lock go. ``durable`` is then called, and a
failure later in the batch means only the units after that point run again.
"""

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ledger.edges.fileio import FileIdentity, file_identity, settled
from ledger.edges.files.chainfile import ChainFile
from ledger.edges.files.groupcommit import GroupCommitError, group_commit, sync_chain
from ledger.edges.files.keptstate import KeptStates, keeping
from ledger.edges.locks import exclusive_lock
from ledger.edges.postgres.db import PgDatabase
from ledger.edges.postgres.group import GroupCommitError as PgGroupCommitError
from ledger.errors import ChainIOError, LedgerError, LockTimeoutError
from ledger.homes import CONFIG_FILE
from ledger.runtime import Runtime, serving_many_calls
from ledger.services.views.rollup_follower import RollupFollower

R = TypeVar("R")
# How long derived state may stay unwritten, in a process that writes it while
# idle, before a batch writes it whole anyway (a gateway that is never idle).
OVERDUE_SECONDS = 5.0
Log = Callable[[str], None]


class BatchRunner:
    """Runs one home's batches in group commits; one per long-lived process."""

    def __init__(self, home: Path, environ: dict[str, str], log: Log) -> None:
        self.home = home
        self.environ = environ
        self._log = log
        self._kept = KeptStates()
        self._chain_for: tuple[FileIdentity | None, Runtime] | None = None
        self.batches = 0
        # The rollups are folded after each batch, on their own thread (never
        # on the call path): a report then finds them current. Only on a file
        # store: a fleet's process shares one database connection, which a
        # fold would hold from the batches (the daemon keeps a fleet's current).
        self.rollups = RollupFollower(self.runtime, log)
        self._on_file = False
        # Set by a process that calls ``write_while_idle`` between its batches.
        self.writes_while_idle = False
        serving_many_calls()

    def runtime(self) -> Runtime:
        """A fresh runtime: a changed ``ledger.toml``, trust store or key is in effect for it."""
        return Runtime(self.home, self.environ)

    def _batch_runtime(self) -> Runtime:
        """The runtime a batch's units share.

        On a file store it is kept from batch to batch while ``ledger.toml`` is
        the same file: building one afresh (its configuration, chain, state and
        key objects and their paths) cost more than a decision. What it keeps is
        checked against the files themselves where it is used (keys and trust
        store by their identity, the state against the chain head), so only the
        configuration is taken on trust, and that by its identity. A fleet's
        units get a fresh one each batch, as before.
        """
        if self._chain_for is not None and isinstance(self._chain_for[1].chain, ChainFile):
            return self._chain_for[1]
        return self.runtime()

    def _batch_chain(self) -> object:
        """The chain a batch groups on, as the home's configuration says now.

        It is parsed again only when ``ledger.toml`` is another file (its
        identity: device, inode, size, mtime, ctime) or has just changed.

        Raises:
            LedgerError: the configuration is unusable.
        """
        identity = file_identity(self.home / CONFIG_FILE)
        if identity is not None and not settled(identity):
            identity = None  # changed a moment ago: another change could keep this identity
        if identity is None or self._chain_for is None or self._chain_for[0] != identity:
            self._chain_for = None
            runtime = self.runtime()
            runtime.chain  # noqa: B018 - parses the configuration: a LedgerError here
            self._chain_for = (identity, runtime)
        return self._chain_for[1].chain

    def run(
        self,
        work: Callable[[Runtime], R],
        rolled_back: Callable[[], None],
        durable: Callable[[], None] = lambda: None,
    ) -> R:
        """``work`` (one batch: each unit in its own transaction) in one group commit; its result.

        ``durable`` is called whenever every unit run so far is durable.
        ``rolled_back`` is called when the group's commit failed, before ``work``
        runs again with each transaction durable on its own: units finished
        before the last ``durable`` call must not run again.
        """
        try:
            return self._run_batch(work, rolled_back, durable)
        finally:
            if self._on_file:
                self.rollups.nudge()

    def _run_batch(
        self,
        work: Callable[[Runtime], R],
        rolled_back: Callable[[], None],
        durable: Callable[[], None],
    ) -> R:
        self.batches += 1
        self._on_file = False
        try:
            chain = self._batch_chain()
        except LedgerError:
            # No usable configuration here: each unit finds that out itself.
            return work(self.runtime())
        self._on_file = isinstance(chain, ChainFile)
        if not isinstance(chain, ChainFile):
            database = getattr(getattr(chain, "inner", None), "db", None)
            if not isinstance(database, PgDatabase):
                return work(self.runtime())
            return self._run_on_database(database, work, rolled_back, durable)
        try:
            with group_commit(chain) as group, keeping(self._kept):
                group.after_commit.append(self._write_state_when_due)
                group.on_durable.append(durable)
                return work(self._batch_runtime())
        except GroupCommitError as exc:
            self._log(f"group commit failed, running the batch again one by one: {exc}")
            self._kept.forget()
            with contextlib.suppress(LedgerError):
                self.runtime().states.delete()
            rolled_back()
            return work(self.runtime())
        except ChainIOError:
            # The group could not start (the chain or its lock is unusable):
            # each unit meets that as it would on its own.
            return work(self.runtime())

    def _run_on_database(
        self,
        database: PgDatabase,
        work: Callable[[Runtime], R],
        rolled_back: Callable[[], None],
        durable: Callable[[], None],
    ) -> R:
        begun = False
        try:
            with database.group() as group:
                begun = True
                if group is not None:
                    group.on_durable.append(durable)
                return work(self.runtime())
        except PgGroupCommitError as exc:
            self._log(f"group commit failed, running the batch again one by one: {exc}")
            rolled_back()
            return work(self.runtime())
        except LedgerError:
            if begun:
                raise
            # The group could not begin (the store is unreachable, the lock
            # busy): each unit meets that as it would on its own.
            return work(self.runtime())

    def _write_state_when_due(self) -> None:
        # A process that writes while idle (``write_while_idle``) leaves it to
        # then, unless it has found no idle moment for a while.
        if self._kept.due(OVERDUE_SECONDS if self.writes_while_idle else None):
            self._kept.write_or_log(self._log)

    def write_while_idle(self, rows: int) -> bool:
        """A little of the derived state kept in memory, written between batches; whether more is.

        Up to ``rows`` key index records, else, once the state is due, the state
        files: a step short enough that a call arriving meanwhile barely waits,
        where the whole write after a batch held that batch's callers several
        milliseconds every half second. Under the chain lock, as every write of
        derived state; when another process holds it, nothing is written now.
        """
        if not self._kept.unwritten():
            return False
        try:
            chain = self._batch_chain()
            if not isinstance(chain, ChainFile):
                return False
            with exclusive_lock(chain.lock_path, 0):
                if self._kept.pending_records():
                    self._kept.write_some_records(rows)
                elif self._kept.due():
                    self._kept.write()
        except LedgerError as exc:  # a busy lock included: tried again at the next step
            if not isinstance(exc, LockTimeoutError):
                self._log(f"could not write derived state: {exc}")
        return self._kept.unwritten()

    def make_predecessor_durable(self) -> None:
        """Make durable what a killed predecessor wrote before anything is decided on top of it."""
        try:
            chain = self._batch_chain()
            if isinstance(chain, ChainFile):
                sync_chain(chain)
        except LedgerError as exc:
            self._log(f"could not fsync the chain at start: {exc}")

    def close(self) -> None:
        """Write the state kept in memory (under the chain lock), before the process exits."""
        self.rollups.close()
        try:
            chain = self._batch_chain()
            if isinstance(chain, ChainFile):
                with exclusive_lock(chain.lock_path, chain.lock_timeout):
                    self._kept.write_or_log(self._log)
        except LedgerError as exc:
            self._log(f"could not write derived state at stop: {exc}")
