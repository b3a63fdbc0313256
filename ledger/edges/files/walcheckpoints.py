"""WAL checkpoints of the derived index, run on a thread of their own in a resident process.

SQLite in WAL mode appends each commit to ``index.sqlite3-wal`` and, once the
WAL holds a thousand pages, copies them into the database inside the commit
that crossed the mark: a checkpoint, which syncs the WAL and then the
database. On the call path that was one verdict in a hundred waiting for two
syncs (the index is derived state and is never synced for a call, SPEC §16).

A resident process calls ``start()`` once: its connections stop checkpointing
(``indexconn.leave_checkpoints_elsewhere``) and a daemon thread runs a PASSIVE
checkpoint (which never waits for a writer or a reader) of each index file
written since its last pass, every ``INTERVAL_SECONDS``, on a connection of its
own, so the call path's connection and its lock are never held for one.

A PASSIVE checkpoint copies pages but never rewinds the WAL: the next writer
does, and only if it finds every page copied, which calls arriving while the
checkpoint syncs never do. So once the WAL holds ``RESTART_FRAMES`` pages the
checkpointer takes the connection's lock from the process's calls and asks for
a RESTART, which copies the few pages left, syncs and rewinds: one short wait
for a call every few thousand pages, against two syncs every thousand, and a
WAL bounded at about 16 MiB (a writer in another process can still make the
RESTART give up after ``_RESTART_WAIT_SECONDS``; the next pass tries again).

A checkpoint cut short (the process killed, or stopping) is one SQLite
recovers from: the WAL keeps the pages and the next checkpoint copies them.
A checkpoint that fails is tried again at the next pass; the index is derived
state, checked row by row on read, so nothing here can make a figure wrong.
"""

import contextlib
import sqlite3
import threading
import time
from pathlib import Path

from ledger.edges.files import indexconn

INTERVAL_SECONDS = 0.5
RESTART_FRAMES = 4096
# How long the checkpointer itself waits for the write lock (never a caller).
_RESTART_WAIT_SECONDS = 0.2

_STARTED = threading.Lock()
_thread: threading.Thread | None = None


def start() -> None:
    """Checkpoint this process's index files on a thread of their own (idempotent)."""
    global _thread  # noqa: PLW0603 - one checkpointer for the process
    with _STARTED:
        if _thread is not None and _thread.is_alive():
            return
        indexconn.leave_checkpoints_elsewhere()
        _thread = threading.Thread(target=_run, name="ledger-index-checkpoints", daemon=True)
        _thread.start()


def _run() -> None:
    checkpointer = _Checkpointer()
    while True:
        time.sleep(INTERVAL_SECONDS)
        checkpointer.pass_once()


class _Checkpointer:
    """Its own connection to each index file, and the commits it has checkpointed."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[tuple[int, int], sqlite3.Connection]] = {}
        self._seen: dict[tuple[str, tuple[int, int]], int] = {}

    def pass_once(self) -> None:
        """A PASSIVE checkpoint of each file committed to since the last pass."""
        written = indexconn.open_files()
        for path in set(self._open) - {path for path, _shared in written}:
            self._close(path)  # the process let it go (removed, moved, swapped in)
        for path, shared in written:
            identity, commits = shared.identity, shared.commits
            if self._seen.get((path, identity)) == commits:
                continue
            with contextlib.suppress(sqlite3.Error, OSError):
                connection = self._connection(path, identity)
                _busy, frames, _copied = connection.execute(
                    "PRAGMA wal_checkpoint(PASSIVE)"
                ).fetchone()
                if frames > RESTART_FRAMES:
                    # Under the lock the process's own calls take the connection
                    # by: none is mid-transaction, so the RESTART never waits on
                    # one, and the next call waits only for the rewind.
                    with shared.lock:
                        connection.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
                self._seen[(path, identity)] = commits

    def _close(self, path: str) -> None:
        _identity, connection = self._open.pop(path)
        with contextlib.suppress(sqlite3.Error):
            connection.close()
        self._seen = {seen: n for seen, n in self._seen.items() if seen[0] != path}

    def _connection(self, path: str, identity: tuple[int, int]) -> sqlite3.Connection:
        """The checkpointer's connection to ``path`` as it is now (never creating the file)."""
        held = self._open.get(path)
        if held is not None and held[0] == identity:
            return held[1]
        if held is not None:
            self._close(path)
        uri = Path(path).absolute().as_uri() + "?mode=rw"
        connection = sqlite3.connect(
            uri,
            uri=True,
            timeout=_RESTART_WAIT_SECONDS,
            isolation_level=None,
            check_same_thread=False,
        )
        self._open[path] = (identity, connection)
        return connection
