"""Derived state built beside the live one (``state/rebuild/``), then swapped in.

``rebuild-state`` folds the whole verified chain into it without the chain
lock, so verdicts keep being decided from the live state meanwhile; under the
lock it folds only the tail appended since and takes the live state's place.

The live state is two files, ``derived.json`` and ``index.sqlite3``, which no
single rename replaces together. The swap removes the live file first, then
renames the new index and the new file in, and makes the folder durable: a
crash inside it leaves no state file at all, or the new one with its index,
and a missing state is folded afresh from the chain on the next use (never a
state with another's index, never one that counts less). A crash before the
swap leaves the live state as it was and an aside folder the next rebuild
clears. Long-lived readers (``ledger serve``, the gateway, the resident gate)
see the state file's identity change (``keptstate``) and the index file's
(``indexconn``), drop what they held and read the new ones.
"""

import contextlib
import os
import shutil
import sqlite3
import time
from contextlib import AbstractContextManager
from typing import Any

from ledger.edges.fileio import fsync_dir, remove_tree
from ledger.edges.files.indexconn import connect, forget
from ledger.edges.files.indexdb import IndexDb
from ledger.edges.files.statefile import StateFile
from ledger.edges.locks import exclusive_lock
from ledger.errors import ChainIOError

# How long a second ``rebuild-state`` waits for one already running.
REBUILD_WAIT_SECONDS = 10.0

_ASIDE = "rebuild"

# A checkpoint answering busy is asked again, this often, this far apart.
_SETTLE_ATTEMPTS = 200
_SETTLE_PAUSE_SECONDS = 0.01


class AsideState(StateFile):
    """A fresh derived state beside ``live``'s, sharing its MAC key and its points."""

    def __init__(self, live: StateFile) -> None:
        super().__init__(live.directory / _ASIDE, live.mac_key_path, live.idempotency_days)
        # Points are folds of the verified chain at a position, whatever state
        # they were taken for: the live ones serve both.
        self.points = live.points
        self.live = live

    def holding(self) -> AbstractContextManager[None]:
        """Held by the one ``rebuild-state`` building a state aside.

        Raises:
            LockTimeoutError: another rebuild held it ``REBUILD_WAIT_SECONDS``.
            ChainIOError: the lock file cannot be opened.
        """
        try:
            self.live.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ChainIOError(f"cannot create {self.live.directory}: {exc.strerror}") from exc
        return exclusive_lock(self.live.directory / "rebuild.lock", REBUILD_WAIT_SECONDS)

    def clear(self) -> None:
        """Remove what a rebuild cut short left here.

        Raises:
            ChainIOError: it cannot be removed.
        """
        forget(os.fspath(self.index_path))
        try:
            remove_tree(self.directory)
            # A run killed while it removed an earlier aside folder left it
            # renamed (``remove_tree``); under the rebuild lock nobody else is
            # removing one, so whatever is left is a dead run's.
            for left in self.live.directory.glob(f".{_ASIDE}.old-*"):
                shutil.rmtree(left, ignore_errors=True)
        except OSError as exc:
            raise ChainIOError(f"cannot clear {self.directory}: {exc.strerror}") from exc

    def swap_in(self) -> None:
        """Put this state in the live one's place (under the chain lock).

        Raises:
            ChainIOError: a file cannot be moved; the live state is then
                missing or whole, and the next use folds afresh what is missing.
        """
        index_path = os.fspath(self.index_path)
        try:
            self._settle(index_path)
            if not self.path.exists() or not self.index_path.exists():
                raise ChainIOError(f"the state built in {self.directory} is incomplete")
            with contextlib.suppress(FileNotFoundError):
                self.live.path.unlink()
            fsync_dir(self.live.directory)
            IndexDb(self.live.index_path, b"").remove()
            self.index_path.replace(self.live.index_path)
            self.path.replace(self.live.path)
            fsync_dir(self.live.directory)
        except OSError as exc:
            raise ChainIOError(f"cannot swap the rebuilt state in: {exc.strerror}") from exc
        with contextlib.suppress(sqlite3.Error):
            # Opened in place once, as a writer leaves it (its log beside it),
            # so the first reader after the swap changes no file of the home.
            connect(os.fspath(self.live.index_path))
        self.clear()

    @staticmethod
    def _settle(index_path: str) -> None:
        """Fold the index's write-ahead log into its file and close it: one file to move.

        Raises:
            ChainIOError: the index cannot be checkpointed.
        """
        try:
            shared = connect(index_path)
            with shared.lock:
                # A checkpoint already running (a resident process's checkpoint
                # thread, ``walcheckpoints``) makes this one answer "busy" at
                # once, without waiting: asked again until it has run.
                for _attempt in range(_SETTLE_ATTEMPTS):
                    busy = shared.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                    if not busy or not busy[0]:
                        break
                    time.sleep(_SETTLE_PAUSE_SECONDS)
        except sqlite3.Error as exc:
            raise ChainIOError(f"cannot settle the rebuilt index: {exc}") from exc
        finally:
            # The last connection closed removes the emptied log; the file stays
            # in WAL mode, so a reader opening it in place changes no byte.
            forget(index_path)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(index_path + "-wal").st_size:  # noqa: PTH116 - a path string
                raise ChainIOError("the rebuilt index's log could not be folded into it")


def aside_of(live: Any) -> AsideState | None:
    """A state to build beside ``live`` (``None``: its store builds none, e.g. PostgreSQL)."""
    return AsideState(live) if isinstance(live, StateFile) else None
