"""The derived indexes on disk: ``state/index.sqlite3`` (SQLite, WAL, never fsync'd on a call).

Derived state, rebuilt from the chain: the chain's two fsyncs per call are the
durable copy, so the database runs with ``synchronous = NORMAL`` in WAL mode
(a commit writes the WAL and returns; only a checkpoint, every thousand pages
or so, syncs). After a crash it is consistent but may lag; after a power loss
it may lose its newest commits, which the state file's ``seq`` catches.

Tables, each row MAC'd (HMAC-SHA256 under ``keys/state-mac.key``, over its
table, its key columns and its values), so an edited row is found when read:

- ``keys``: idempotency keys and served request ids → the first entry sealed
  with them (the hot part, ``chain.idempotency_days`` long);
- ``cold_keys``: keys that left the hot part, as a keyed 64-bit tag → the
  entry's position only; a lookup that finds a tag reads that entry from the
  chain and compares the key itself (slow, never wrong);
- ``refs``: every entry hash → its position (segment, line, byte offset);
- ``counters``: budgets' per-value counters, each row with its value at the
  last save and the one before it (``seq``, ``prior_seq``), so a state file
  that lags the database by a save reads the counter as it was then;
- ``meta``: ``seq``, the number of the newest save, and ``floor``, the oldest
  state ``seq`` the counters can still answer for.

Every write is one immediate transaction, under the chain lock.
"""

import contextlib
import hashlib
import hmac
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ledger.errors import ChainIOError, StateMismatchError

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
_HEAD = b""
# Each table's value columns, after ``k`` and ``next``.
_COLUMNS = {
    "keys": ("ts", "record"),
    "cold_keys": ("offset",),
    "refs": ("segment", "entry", "offset"),
    "counters": ("seq", "counter", "prior_seq", "prior"),
}
# Hot keys moved to the cold table per save at most: a save stays small and
# flat, and a day's keys still leave within a day of calls.
_MOVED_PER_SAVE = 64
_HASH_BYTES = 32
_TAG_BYTES = 8
_SEGMENT_BYTES = 4
_ENTRY_BYTES = 8
_EPOCH_DIGITS = 16


class Position(NamedTuple):
    """Where an entry is: its segment (0 until segments), line from 1, byte offset if known."""

    segment: int
    entry: int
    offset: int | None


class RefMatch(NamedTuple):
    """An entry whose hash begins with a looked-up prefix."""

    entry_hash: str
    position: Position


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _failure(exc: sqlite3.Error, what: str) -> StateMismatchError:
    return StateMismatchError(f"the derived index is unreadable ({what}): {exc}")


class _Shared:
    """One connection per database file and process, used under its own lock."""

    def __init__(self, connection: sqlite3.Connection, identity: tuple[int, int]) -> None:
        self.connection = connection
        self.identity = identity
        self.lock = threading.RLock()
        # Whether every table was seen with its head (checked once, then by
        # every lookup's links).
        self.heads = False


_OPEN: dict[str, _Shared] = {}
_OPEN_LOCK = threading.Lock()


def _identity(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)  # noqa: PTH116 - a path string, kept as given
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _connect(path: str) -> _Shared:
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
            connection.execute("PRAGMA mmap_size = 1073741824")
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


def forget(path: str) -> None:
    """Close the process's connection to ``path`` (the file is about to go)."""
    with _OPEN_LOCK:
        shared = _OPEN.pop(path, None)
    if shared is not None:
        with contextlib.suppress(sqlite3.Error):
            shared.connection.close()


def counter_key(budget: str, epoch: int, value: str = "") -> bytes:
    """A counter's key: its budget (length first), its epoch, its value (``""``: the prefix)."""
    return f"{len(budget):02x}{budget}{epoch:0{_EPOCH_DIGITS}x}{value}".encode()


def _cold_key(tag: int, segment: int = 0, entry: int = 0) -> bytes:
    return (
        (tag % (1 << 64)).to_bytes(_TAG_BYTES, "big")
        + segment.to_bytes(_SEGMENT_BYTES, "big")
        + entry.to_bytes(_ENTRY_BYTES, "big")
    )


def _part(part: object) -> str:
    """One part of a MAC'd row, its kind first, so ``None``, ``""`` and ``0`` all differ."""
    if part is None:
        return "n"
    if isinstance(part, bytes):
        return "b" + part.hex()
    if isinstance(part, int):
        return f"i{part}"
    return f"s{part}"


def _damaged(table: str, why: str) -> StateMismatchError:
    return StateMismatchError(f"a derived index row ({table}) {why}")


class IndexDb:
    """The derived indexes of one home."""

    def __init__(self, path: Path, mac_key: bytes) -> None:
        self.path = os.fspath(path)
        self.key = mac_key
        # The key's inner and outer states, worked out once: each row's MAC copies them.
        self._keyed = hmac.new(mac_key, digestmod=hashlib.sha256)

    def _mac(self, *parts: object) -> bytes:
        mac = self._keyed.copy()
        mac.update("\x00".join(_part(part) for part in parts).encode())
        return mac.digest()

    def _check(self, mac: bytes, *parts: object) -> None:
        if not hmac.compare_digest(self._mac(*parts), bytes(mac)):
            raise _damaged(str(parts[0]), "does not match its MAC (edited?)")

    def tag(self, key: str) -> int:
        """A key's tag in the cold table: keyed, so nobody without the MAC key can aim one."""
        digest = hmac.new(self.key, b"cold\x00" + key.encode(), hashlib.sha256).digest()
        return int.from_bytes(digest[:_TAG_BYTES], "big")

    # Linked rows (see ``_SCHEMA``).

    def _row_mac(
        self, table: str, k: bytes, following: bytes | None, values: tuple[Any, ...]
    ) -> bytes:
        return self._mac(table, k, following, *values)

    def _range(
        self, db: sqlite3.Connection, table: str, low: bytes, high: bytes
    ) -> list[tuple[bytes, tuple[Any, ...]]]:
        """Every row with ``low <= k <= high``, shown complete by the links around them.

        Raises:
            StateMismatchError: a row fails its MAC, or one is missing or added.
        """
        columns = ", ".join(_COLUMNS[table])
        before = db.execute(
            f"SELECT k, next, {columns}, mac FROM {table} WHERE k < ?"  # noqa: S608
            " ORDER BY k DESC LIMIT 1",
            (low,),
        ).fetchone()
        rows = db.execute(
            f"SELECT k, next, {columns}, mac FROM {table}"  # noqa: S608 - fixed names
            " WHERE k BETWEEN ? AND ? ORDER BY k",
            (low, high),
        ).fetchall()
        if before is None:
            if low == _HEAD and rows:
                before, rows = rows[0], rows[1:]  # the head itself is asked for
            elif _meta(self, db)[0] == 0 and not rows:
                return []  # nothing was ever written
            else:
                raise _damaged(table, "is missing (the head of its table)")
        found = []
        expected = self._linked(table, before)
        for row in rows:
            if bytes(row[0]) != expected:
                raise _damaged(table, "is missing or was added")
            expected = self._linked(table, row)
            found.append((bytes(row[0]), tuple(row[2:-1])))
        if expected is not None and expected <= high:
            raise _damaged(table, "is missing")
        return found

    def _linked(self, table: str, row: Any) -> bytes | None:
        """The row's ``next``, once its MAC is checked."""
        k, following, *values, mac = row
        following = None if following is None else bytes(following)
        self._check(mac, table, bytes(k), following, *values)
        return following

    def _locate(
        self, db: sqlite3.Connection, table: str, k: bytes
    ) -> tuple[tuple[Any, ...] | None, tuple[bytes, bytes | None, tuple[Any, ...]] | None]:
        """Row ``k``'s values (``None``: absent, shown by the row before it) and that row.

        One query: the row itself, or the one just before ``k``, whose ``next``
        must lie beyond ``k``. The second part is ``(key, next, values)`` of the
        row before ``k`` when ``k`` is absent, else ``None``.

        Raises:
            StateMismatchError: a row fails its MAC, or one is missing or added.
        """
        columns = ", ".join(_COLUMNS[table])
        row = db.execute(
            f"SELECT k, next, {columns}, mac FROM {table} WHERE k <= ?"  # noqa: S608
            " ORDER BY k DESC LIMIT 1",
            (k,),
        ).fetchone()
        if row is None:
            if (
                _meta(self, db)[0] == 0
                and db.execute(
                    f"SELECT 1 FROM {table} LIMIT 1"  # noqa: S608 - fixed names
                ).fetchone()
                is None
            ):
                return None, None  # nothing was ever written
            raise _damaged(table, "is missing (the head of its table)")
        following = self._linked(table, row)
        if bytes(row[0]) == k:
            return tuple(row[2:-1]), None
        if following is not None and following <= k:
            raise _damaged(table, "is missing")
        return None, (bytes(row[0]), following, tuple(row[2:-1]))

    def _get(self, db: sqlite3.Connection, table: str, k: bytes) -> tuple[Any, ...] | None:
        return self._locate(db, table, k)[0]

    @contextlib.contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        try:
            shared = _connect(self.path)
            with shared.lock:
                yield shared.connection
        except sqlite3.Error as exc:
            raise _failure(exc, what) from exc

    @contextlib.contextmanager
    def writing(self) -> Iterator["IndexTx"]:
        """One write transaction (commits when the block ends without an error).

        Raises:
            ChainIOError: the database cannot be written.
            StateMismatchError: a row it had to change is damaged.
        """
        try:
            shared = _connect(self.path)
        except sqlite3.Error as exc:
            raise ChainIOError(f"cannot open the derived index: {exc}") from exc
        with shared.lock:
            db = shared.connection
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise ChainIOError(f"cannot write the derived index: {exc}") from exc
            try:
                tx = IndexTx(self, db)
                if not shared.heads:
                    tx.ensure_heads()
                    shared.heads = True
                yield tx
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise ChainIOError(f"cannot write the derived index: {exc}") from exc
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise

    def meta(self) -> tuple[int, int]:
        """``(seq, floor)``: the newest save's number, the oldest state seq counters answer for.

        Raises:
            StateMismatchError: the database is unreadable or a meta row was edited.
        """
        with self._reading("meta") as db:
            return _meta(self, db)

    def find_key(self, key: str) -> dict[str, Any] | list[Position] | None:
        """The hot record of ``key``; else the positions its cold tag names (maybe none).

        Raises:
            StateMismatchError: the database is unreadable, or a row was edited or removed.
        """
        with self._reading("keys") as db:
            hot = self._get(db, "keys", key.encode())
            if hot is not None:
                record: dict[str, Any] = json.loads(hot[1])
                return record
            tag = self.tag(key)
            low = _cold_key(tag)
            cold = self._range(db, "cold_keys", low, low[:_TAG_BYTES] + b"\xff" * len(low))
        positions = [
            Position(
                int.from_bytes(k[_TAG_BYTES : _TAG_BYTES + _SEGMENT_BYTES], "big"),
                int.from_bytes(k[_TAG_BYTES + _SEGMENT_BYTES :], "big"),
                values[0],
            )
            for k, values in cold
        ]
        return positions or None

    def find_refs(self, prefix: str, limit: int = 2) -> list[RefMatch]:
        """Up to ``limit`` entries whose hash begins with the hex digits ``prefix``.

        Raises:
            StateMismatchError: the database is unreadable, or a row was edited or removed.
        """
        digits = _HASH_BYTES * 2
        low = bytes.fromhex((prefix + "0" * digits)[:digits])
        high = bytes.fromhex((prefix + "f" * digits)[:digits])
        with self._reading("refs") as db:
            rows = self._range(db, "refs", low, high)
        return [
            RefMatch(k.hex(), Position(segment, entry, offset))
            for k, (segment, entry, offset) in rows[:limit]
        ]

    def find_counter(self, budget: str, epoch: int, value: str, seq: int) -> Any:
        """A counter as the state saved at ``seq`` knows it (``None``: no counter).

        Raises:
            StateMismatchError: a row was edited or removed, or no longer knows that save.
        """
        with self._reading("counters") as db:
            row = self._get(db, "counters", counter_key(budget, epoch, value))
        return None if row is None else _counter_at(budget, value, row, seq)

    def scan_counters(self, budget: str, epoch: int, seq: int) -> dict[str, Any]:
        """Every counter of one budget's epoch as the save ``seq`` knows them (``None``: gone).

        Raises:
            StateMismatchError: a row was edited or removed, or no longer knows that save.
        """
        prefix = counter_key(budget, epoch)
        with self._reading("counters") as db:
            rows = self._range(db, "counters", prefix, prefix + b"\xff")
        return {
            k[len(prefix) :].decode(): _counter_at(budget, k[len(prefix) :].decode(), row, seq)
            for k, row in rows
        }

    def counts(self) -> dict[str, int]:
        """How many rows each table holds, heads aside (for checks and benchmarks)."""
        with self._reading("counts") as db:
            return {
                table: db.execute(
                    f"SELECT count(*) FROM {table} WHERE k > x''"  # noqa: S608 - fixed names
                ).fetchone()[0]
                for table in _COLUMNS
            }

    def check_all(self) -> None:
        """Check every row and link (``rebuild-state`` and the integrity checks; O(rows)).

        Raises:
            StateMismatchError: a row was edited, added or removed, or the database is damaged.
        """
        with self._reading("check") as db:
            _meta(self, db)
            for table in _COLUMNS:
                self._range(db, table, _HEAD, b"\xff" * (_HASH_BYTES + 1))

    def remove(self) -> None:
        """Remove the database (rebuilt from the chain with the state)."""
        forget(self.path)
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path + suffix)  # noqa: PTH108 - a path string


class CountersBehindError(StateMismatchError):
    """The counters were saved past the state that asks, further than they can answer for."""


def _counter_at(budget: str, value: str, row: tuple[Any, ...], seq: int) -> Any:
    row_seq, counter, prior_seq, prior = row
    if row_seq <= seq:
        text = counter
    elif prior_seq <= seq:
        text = prior
    else:
        raise CountersBehindError(f"counter {budget}/{value} no longer knows save {seq}")
    return None if text is None else json.loads(text)


def _meta(index: IndexDb, db: sqlite3.Connection) -> tuple[int, int]:
    found = {}
    for name, value, mac in db.execute("SELECT name, value, mac FROM meta"):
        index._check(mac, "meta", name, value)  # noqa: SLF001 - same module
        found[name] = int(value)
    return found.get("seq", 0), found.get("floor", 0)


class IndexTx:
    """Writes inside one transaction."""

    def __init__(self, index: IndexDb, db: sqlite3.Connection) -> None:
        self.index = index
        self.db = db

    def ensure_heads(self) -> None:
        """Give each table its head row (a fresh database).

        Raises:
            StateMismatchError: a table has rows but no head (removed).
        """
        for table in _COLUMNS:
            if self.db.execute(f"SELECT 1 FROM {table} WHERE k = x''").fetchone() is None:  # noqa: S608
                if self.db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None:  # noqa: S608
                    raise _damaged(table, "is missing (the head of its table)")
                self._put_row(table, _HEAD, None, _HEAD_VALUES[table])

    def _put_row(
        self, table: str, k: bytes, following: bytes | None, values: tuple[Any, ...]
    ) -> None:
        names = ", ".join(_COLUMNS[table])
        marks = ", ".join("?" * (len(values) + 3))
        mac = self.index._row_mac(table, k, following, values)  # noqa: SLF001
        self.db.execute(
            f"INSERT OR REPLACE INTO {table} (k, next, {names}, mac) VALUES ({marks})",  # noqa: S608
            (k, following, *values, mac),
        )

    def _before(self, table: str, k: bytes) -> tuple[bytes, bytes | None, tuple[Any, ...]]:
        """The row just before ``k`` (checked): its key, its ``next``, its values."""
        columns = ", ".join(_COLUMNS[table])
        row = self.db.execute(
            f"SELECT k, next, {columns}, mac FROM {table} WHERE k < ?"  # noqa: S608
            " ORDER BY k DESC LIMIT 1",
            (k,),
        ).fetchone()
        if row is None:
            raise _damaged(table, "is missing (the head of its table)")
        following = self.index._linked(table, row)  # noqa: SLF001
        return bytes(row[0]), following, tuple(row[2:-1])

    def get(self, table: str, k: bytes) -> tuple[Any, ...] | None:
        """A row's values (checked, its absence too), or ``None``."""
        return self.index._get(self.db, table, k)  # noqa: SLF001

    def put(self, table: str, k: bytes, values: tuple[Any, ...], *, keep: bool = False) -> bool:
        """Insert or replace the row ``k``, linked in after the row before it.

        ``keep``: a row already there stays as it is. Whether anything was written.
        """
        found, before = self.index._locate(self.db, table, k)  # noqa: SLF001
        if found is not None and keep:
            return False
        self._write_at(table, k, values, found, before)
        return True

    def _write_at(
        self,
        table: str,
        k: bytes,
        values: tuple[Any, ...],
        found: tuple[Any, ...] | None,
        before: tuple[bytes, bytes | None, tuple[Any, ...]] | None,
    ) -> None:
        """Write row ``k`` where ``_locate`` found it (or the row before it)."""
        if found is not None:
            row = self.db.execute(
                f"SELECT next FROM {table} WHERE k = ?",  # noqa: S608 - fixed names
                (k,),
            ).fetchone()
            self._put_row(table, k, None if row[0] is None else bytes(row[0]), values)
            return
        if before is None:
            raise _damaged(table, "is missing (the head of its table)")
        self._put_row(table, k, before[1], values)
        self._put_row(table, before[0], k, before[2])

    def delete_range(self, table: str, low: bytes, high: bytes) -> int:
        """Remove every row with ``low <= k <= high``, the row before them linked past them."""
        rows = self.index._range(self.db, table, low, high)  # noqa: SLF001
        if not rows:
            return 0
        before, _following, before_values = self._before(table, low)
        last = self.db.execute(
            f"SELECT next FROM {table} WHERE k = ?",  # noqa: S608 - fixed names
            (rows[-1][0],),
        ).fetchone()[0]
        self.db.execute(f"DELETE FROM {table} WHERE k BETWEEN ? AND ?", (low, high))  # noqa: S608
        self._put_row(table, before, None if last is None else bytes(last), before_values)
        return len(rows)

    def meta(self) -> tuple[int, int]:
        """``(seq, floor)`` as this transaction sees them."""
        return _meta(self.index, self.db)

    def set_meta(self, seq: int, floor: int, known: tuple[int, int] | None = None) -> None:
        """Record the newest save's number and the oldest state the counters answer for.

        ``known``: the two as this transaction read them (unchanged ones are not written).
        """
        known = self.meta() if known is None else known
        for name, value, was in (("seq", seq, known[0]), ("floor", floor, known[1])):
            if value == was and value:
                continue
            self.db.execute(
                "INSERT OR REPLACE INTO meta (name, value, mac) VALUES (?, ?, ?)",
                (name, value, self.index._mac("meta", name, value)),  # noqa: SLF001
            )

    def has_counters(self) -> bool:
        """Whether any counter row is kept."""
        found = self.db.execute("SELECT 1 FROM counters WHERE k > x'' LIMIT 1").fetchone()
        return found is not None

    def clear(self, tables: tuple[str, ...] = tuple(_COLUMNS)) -> None:
        """Forget every row of ``tables`` (a rebuild from the whole chain follows)."""
        for table in tables:
            self.db.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed table names
            self._put_row(table, _HEAD, None, _HEAD_VALUES[table])

    def add_keys(self, records: Iterable[dict[str, Any]], cutoff: str | None) -> None:
        """Add key records (the first record of a key wins); older than ``cutoff``: cold."""
        for record in records:
            key, ts = record["key"], str(record.get("ts") or "")
            if cutoff is not None and ts and ts < cutoff:
                self._add_cold(key, record)
            else:
                self.put("keys", key.encode(), (ts, _json(record)), keep=True)

    def _add_cold(self, key: str, record: dict[str, Any]) -> None:
        entry = record.get("entry")
        if not isinstance(entry, int) or entry < 1:
            return  # an entry of unknown position is not indexed; its key is in the chain
        k = _cold_key(self.index.tag(key), int(record.get("segment") or 0), entry)
        self.put("cold_keys", k, (record.get("offset"),), keep=True)

    def expire_keys(self, cutoff: str) -> int:
        """Move a few hundred of the oldest keys sealed before ``cutoff`` to the cold table."""
        rows = self.db.execute(
            "SELECT k FROM keys WHERE k > x'' AND ts < ? ORDER BY ts LIMIT ?",
            (cutoff, _MOVED_PER_SAVE),
        ).fetchall()
        for (k,) in rows:
            found = self.get("keys", bytes(k))
            if found is None:
                continue
            self._add_cold(bytes(k).decode(), json.loads(found[1]))
            self.delete_range("keys", bytes(k), bytes(k))
        return len(rows)

    def add_refs(self, refs: Iterable[tuple[str, Position]]) -> None:
        """Add entry hash → position rows (a hash indexed already keeps its first row)."""
        for entry_hash, where in refs:
            k = bytes.fromhex(entry_hash)
            self.put("refs", k, tuple(where), keep=True)

    def save_counters(
        self, changes: Iterable[tuple[str, int, str, Any]], loaded: int, seq: int
    ) -> None:
        """Write counters at save ``seq``, keeping each one's value at the state ``loaded``."""
        for budget, epoch, value, counter in changes:
            k = counter_key(budget, epoch, value)
            row, before = self.index._locate(self.db, "counters", k)  # noqa: SLF001
            prior_seq, prior = 0, None
            if row is not None:
                # The value the loaded state knows stays as the prior: a newer
                # one was written by a save whose state never reached its file.
                prior_seq, prior = (row[0], row[1]) if row[0] <= loaded else (row[2], row[3])
            text = None if counter is None else _json(counter)
            self._write_at("counters", k, (seq, text, prior_seq, prior), row, before)

    def drop_epochs_before(self, budget: str, epoch: int) -> None:
        """Forget a budget's counters of epochs older than ``epoch`` (no state reads them)."""
        if epoch > 0:
            self.delete_range(
                "counters", counter_key(budget, 0), counter_key(budget, epoch - 1) + b"\xff"
            )


_HEAD_VALUES: dict[str, tuple[Any, ...]] = {
    "keys": ("", ""),
    "cold_keys": (None,),
    "refs": (0, 0, None),
    "counters": (0, None, 0, None),
}
