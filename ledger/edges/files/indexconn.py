"""The process's connection to a derived index file (``state/index.sqlite3``).

One connection per file and process, opened in WAL mode with the schema
made, and opened again when the file was replaced; ``IndexDb``
(``ledger.edges.files.indexdb``) reads and writes through it.

A resident process (the gateway, ``ledger serve``, the Python API) moves the
WAL's checkpoints off its call path (``ledger.edges.files.walcheckpoints``):
with ``synchronous = NORMAL`` a commit writes the WAL without a sync, but a
checkpoint syncs twice, and SQLite runs one inside every thousandth page's
commit, so one call in a hundred waited for it.
"""

import contextlib
import os
import sqlite3
import threading

# Every indexed table is a linked list in key order: each row names the key of
# the next row and its MAC covers that name, from a head row (key ``x''``) on.
# So a row cannot be removed, nor one added, without a row whose MAC no longer
# matches: a lookup that finds nothing checks the row before the key, whose
# ``next`` must lie beyond it (as DNSSEC proves a name absent).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL, mac BLOB NOT NULL)
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS keys (k BLOB PRIMARY KEY, next BLOB, ts TEXT NOT NULL,
    record TEXT NOT NULL, mac BLOB NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS keys_by_ts ON keys (ts);
CREATE TABLE IF NOT EXISTS cold_keys (k BLOB PRIMARY KEY, next BLOB, offset INTEGER,
    mac BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS refs (k BLOB PRIMARY KEY, next BLOB, segment INTEGER NOT NULL,
    entry INTEGER NOT NULL, offset INTEGER, mac BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counters (k BLOB PRIMARY KEY, next BLOB, seq INTEGER NOT NULL,
    counter TEXT, prior_seq INTEGER NOT NULL, prior TEXT, mac BLOB NOT NULL) WITHOUT ROWID;
"""


# How much of the file lookups map (all of it, in practice).
MMAP_BYTES = 1 << 30


class _Shared:
    """One connection per database file and process, used under its own lock."""

    def __init__(self, connection: sqlite3.Connection, identity: tuple[int, int]) -> None:
        self.connection = connection
        self.identity = identity
        self.lock = threading.RLock()
        # Whether every table was seen with its head (checked once, then by
        # every lookup's links).
        self.heads = False
        # Write transactions committed: what a checkpointer has not yet seen.
        self.commits = 0


_OPEN: dict[str, _Shared] = {}
_OPEN_LOCK = threading.Lock()
# Whether connections leave checkpoints to a checkpointer (SQLite's automatic
# checkpoint otherwise: a one-shot process has none, and pays one call in a hundred).
_CHECKPOINTS_ELSEWHERE = False


def _identity(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)  # noqa: PTH116 - a path string, kept as given
    except OSError:
        return None
    return found.st_dev, found.st_ino


def connect(path: str) -> _Shared:
    """The process's connection to ``path``, opened again when the file was replaced."""
    with _OPEN_LOCK:
        shared = _OPEN.get(path)
        identity = _identity(path)
        if shared is not None and identity == shared.identity:
            return shared
        if shared is not None:
            with contextlib.suppress(sqlite3.Error):
                shared.connection.close()
            del _OPEN[path]
        connection = sqlite3.connect(
            path, timeout=30, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            # Lookups read the file through the page cache, not a read() per page:
            # flat at a million rows as at ten thousand.
            connection.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            if _CHECKPOINTS_ELSEWHERE:
                connection.execute("PRAGMA wal_autocheckpoint = 0")
            connection.executescript(_SCHEMA)
        except sqlite3.Error:
            connection.close()
            raise
        with contextlib.suppress(OSError):
            os.chmod(path, 0o600)  # noqa: PTH101 - a path string
        found = _identity(path)
        assert found is not None  # noqa: S101 - sqlite just created it
        shared = _OPEN[path] = _Shared(connection, found)
        return shared


def leave_checkpoints_elsewhere() -> None:
    """This process's connections, open and to come, run no checkpoint of their own."""
    global _CHECKPOINTS_ELSEWHERE  # noqa: PLW0603 - one setting for the process
    with _OPEN_LOCK:
        _CHECKPOINTS_ELSEWHERE = True
        opened = list(_OPEN.values())
    for shared in opened:
        with shared.lock, contextlib.suppress(sqlite3.Error):
            shared.connection.execute("PRAGMA wal_autocheckpoint = 0")


def open_files() -> list[tuple[str, _Shared]]:
    """Each index file this process has open, and its connection (identity, commits, lock)."""
    with _OPEN_LOCK:
        return list(_OPEN.items())


def forget(path: str) -> None:
    """Close the process's connection to ``path`` (the file is about to go)."""
    with _OPEN_LOCK:
        shared = _OPEN.pop(path, None)
    if shared is not None:
        with contextlib.suppress(sqlite3.Error):
            shared.connection.close()
