"""Group commit on the chain file: one lock hold and one fsync for many transactions.

``ledger serve`` decides a batch of requests inside one group. Each request still
runs its own transaction (read the head, decide, seal, append), so every
decision stays atomic with its reservation; what changes is that the group
holds ``events.jsonl.lock`` across the whole batch and the appends are fsync'd
once, when the group ends, before any request in it is answered (SPEC §2, §9).
In-process writers (a cron job, a client whose server is down) wait for the
lock as they would for any writer, so they interleave between groups.

A transaction joins the group running in its thread when it names the same
lock file (same device and inode, whatever the path's spelling); any other
chain is locked and fsync'd as usual. Outside a group nothing changes: the
lookup is one context-variable read.

If the final fsync fails, the group's appends are cut off again (the chain
returns to its size at the start, under the lock still held) and
``GroupCommitError`` is raised: none of them may be acknowledged. Derived state
written during the group may then be ahead of the chain; the caller removes it
(it is rebuilt from the chain) before deciding anything else.

A request that must wait on something slow outside the chain (a verdict that
runs the UsageObserver) lets other writers in meanwhile
(``lock_released``): the group's appends so far are made durable, the lock is
let go, and taken again after the wait, so a slow observer never holds up an
in-process writer.
"""

import contextlib
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Protocol

from ledger.edges.fileio import fsync_dir, open_regular
from ledger.edges.locks import exclusive_lock
from ledger.errors import ChainIOError, LockTimeoutError


class LockedChain(Protocol):
    """What a group needs of a chain file (``ChainFile``): its paths and lock settings."""

    path: Path
    lock_path: Path
    lock_timeout: float
    follow_symlinks: bool

    def check_path(self) -> None:
        """Refuse a chain path that cannot be a chain."""
        ...

    def exists(self) -> bool:
        """Whether anything is at the chain path."""
        ...


class GroupCommitError(ChainIOError):
    """The group's appends could not be made durable; they were removed again."""


class GroupCommit:
    """One batch of transactions on one chain under one lock hold."""

    __slots__ = (
        "_follow",
        "_hold",
        "_lock_path",
        "_lock_timeout",
        "_path",
        "after_commit",
        "after_release",
        "created",
        "held",
        "home",
        "identity",
        "memo",
        "on_durable",
        "pending",
        "start_size",
    )

    def __init__(
        self, path: Path, identity: tuple[int, int], start_size: int, *, held: bool, follow: bool
    ) -> None:
        self._path = path
        self._follow = follow
        self.identity = identity
        self.start_size = start_size
        self.held = held
        self.pending = False
        self.created = False
        self._hold = contextlib.ExitStack()
        self._lock_path: Path | None = None
        self._lock_timeout = 0.0
        # Run once the group is durable, still under its lock (derived state
        # kept in memory during the group is written here).
        self.after_commit: list[Callable[[], None]] = []
        # Run once the group has let its lock go (a seal's compression).
        self.after_release: list[Callable[[], None]] = []
        # Run when the group's appends so far were made durable early (before
        # the lock is let go for a wait): a failure later cuts off only what follows.
        self.on_durable: list[Callable[[], None]] = []
        # What the group's transactions read from files only a holder of the
        # lock replaces (the trust store, the state MAC key): read once per hold.
        self.memo: dict[object, object] = {}
        self.home = path.parent

    def appended(self, *, created: bool) -> None:
        """A transaction wrote a whole line; it becomes durable at ``commit``."""
        self.pending = True
        self.created = self.created or created

    def take_lock(self, lock_path: Path, timeout: float) -> None:
        """Hold ``lock_path`` for the group; ``held`` says whether that worked in time.

        Raises:
            ChainIOError: the lock file cannot be opened.
        """
        self._lock_path, self._lock_timeout = lock_path, timeout
        try:
            self._hold.enter_context(exclusive_lock(lock_path, timeout))
        except LockTimeoutError:
            self.held = False
        else:
            self.held = True

    def let_go(self) -> None:
        """Release the group's lock (at its end, or for a wait outside the chain)."""
        self.memo.clear()  # another writer may change anything meanwhile
        self._hold.close()

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        """Let other writers take the lock for the block; take it back after.

        The appends so far are made durable first: once another writer has
        appended after them, a failed fsync could no longer cut them off
        alone. If that fsync fails the lock is kept (the block then runs under
        it, and the group's commit reports the failure as usual). When the lock
        cannot be taken back in time, the group's later transactions fail as a
        lock wait of their own would.

        Raises:
            ChainIOError: the lock file cannot be opened again.
        """
        if not self.held or self._lock_path is None or not self._sync_pending():
            yield
            return
        for hook in self.on_durable:
            hook()
        self.let_go()
        try:
            yield
        finally:
            self.take_lock(self._lock_path, self._lock_timeout)
            with contextlib.suppress(OSError):
                self.start_size = self._path.stat().st_size

    def _sync_pending(self) -> bool:
        if not self.pending:
            return True
        try:
            fd = open_regular(self._path, os.O_WRONLY, follow_symlinks=self._follow)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            if self.created:
                fsync_dir(self._path.parent)
        except OSError:
            return False
        self.pending = False
        self.created = False
        return True

    def commit(self) -> None:
        """Make every append of the group durable (fsync; the directory too if it was created).

        Raises:
            GroupCommitError: the fsync failed; the appends were cut off again.
        """
        if not self.pending:
            self._after()
            return
        try:
            fd = open_regular(self._path, os.O_WRONLY, follow_symlinks=self._follow)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            if self.created:
                fsync_dir(self._path.parent)
        except OSError as exc:
            self._roll_back()
            raise GroupCommitError(
                f"cannot make {self._path} durable: {exc.strerror}; the batch was not recorded"
            ) from exc
        self.pending = False
        self._after()

    def _after(self) -> None:
        hooks, self.after_commit = self.after_commit, []
        for hook in hooks:
            hook()

    def _roll_back(self) -> None:
        # Nothing in the group was acknowledged, and the lock is still ours: cut
        # the chain back to where the group found it. If that fails too, the
        # entries stay, unacknowledged, which a crash could equally leave.
        with contextlib.suppress(OSError):
            fd = open_regular(self._path, os.O_WRONLY, follow_symlinks=self._follow)
            try:
                os.ftruncate(fd, self.start_size)
                os.fsync(fd)
            finally:
                os.close(fd)


_CURRENT: ContextVar[GroupCommit | None] = ContextVar("ledger_group_commit", default=None)


def joined(lock_path: Path, lock_timeout: float) -> GroupCommit | None:
    """The group this thread runs for the chain locked by ``lock_path``, if any.

    Raises:
        LockTimeoutError: the group could not take the lock: every transaction
            in it fails as its own lock wait would have.
    """
    group = _CURRENT.get()
    if group is None:
        return None
    try:
        found = lock_path.stat()
    except OSError:
        return None
    if (found.st_dev, found.st_ino) != group.identity:
        return None
    if not group.held:
        raise LockTimeoutError(f"lock {lock_path} still held after {lock_timeout:g} s")
    return group


def held_memo(home: Path) -> dict[object, object] | None:
    """The memo of the group this thread holds on ``home``'s chain, if any.

    Only the active writer key signs, and only a holder of the chain lock
    rotates it, so a trust store read once under the lock serves the rest of
    the hold; a change made meanwhile without the lock (a key revoked or
    trusted, which never touches the active key) counts from the next hold.
    """
    group = _CURRENT.get()
    if group is None or not group.held or (group.home is not home and group.home != home):
        return None
    return group.memo


@contextlib.contextmanager
def group_commit(chain: LockedChain) -> Iterator[GroupCommit]:
    """Run the block's transactions on ``chain`` as one group.

    When the lock stays busy for ``chain.lock_timeout``, the block still runs,
    and each transaction on the chain raises ``LockTimeoutError``.

    Raises:
        ChainIOError: the chain path is not a regular file, or the lock file
            cannot be opened or identified.
        GroupCommitError: the final fsync failed (nothing in the group is durable).
    """
    chain.check_path()
    group = GroupCommit(chain.path, (0, 0), 0, held=False, follow=chain.follow_symlinks)
    try:
        group.take_lock(chain.lock_path, chain.lock_timeout)
        try:
            found = chain.lock_path.stat()
            group.start_size = chain.path.stat().st_size if chain.exists() else 0
        except OSError as exc:
            raise ChainIOError(f"cannot read {chain.lock_path}: {exc.strerror}") from exc
        group.identity = (found.st_dev, found.st_ino)
        token = _CURRENT.set(group)
        try:
            yield group
        finally:
            _CURRENT.reset(token)
            group.commit()
    finally:
        group.let_go()
    hooks, group.after_release = group.after_release, []
    for hook in hooks:
        hook()


@contextlib.contextmanager
def lock_released(lock_path: Path) -> Iterator[None]:
    """Outside the chain lock for the block, even inside this thread's group on it.

    Outside a group (or in a group on another chain) this changes nothing: the
    caller holds no lock across transactions then.

    Raises:
        ChainIOError: the group's lock file cannot be opened again.
    """
    group = _CURRENT.get()
    if group is None:
        yield
        return
    try:
        found = lock_path.stat()
    except OSError:
        yield
        return
    if (found.st_dev, found.st_ino) != group.identity:
        yield
        return
    with group.released():
        yield


def sync_chain(chain: LockedChain) -> None:
    """Make everything written to ``chain`` durable, by whichever process wrote it.

    A client that retries after losing its server calls it before answering:
    an entry the server wrote but had not fsync'd is then durable before the
    retry acknowledges it (as a duplicate).

    Raises:
        ChainIOError: the chain cannot be opened or fsync'd.
    """
    try:
        fd = open_regular(chain.path, follow_symlinks=chain.follow_symlinks)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ChainIOError(f"cannot read {chain.path}: {exc.strerror}") from exc
    try:
        os.fsync(fd)
    except OSError as exc:
        raise ChainIOError(f"cannot make {chain.path} durable: {exc.strerror}") from exc
    finally:
        os.close(fd)
