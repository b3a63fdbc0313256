"""Derived state on disk: ``state/derived.json``, bound to the chain head by a MAC.

The file records which chain head it reflects (hash and byte size). A keyed
MAC (HMAC-SHA256, key in ``keys/state-mac.key``, mode 0600) makes an edit of
the file detectable. The file is replaced atomically but not fsync'd: after a
power loss it may lag the chain, which the gate catches up by verifying the
missing tail, or it may be unreadable, which the gate treats as a mismatch
(``counter_inconsistent`` until ``ledger rebuild-state``).

Inside ``ledger.edges.files.keptstate.keeping`` (the resident gate) saves and loads
go through memory, and the file is written from there now and then.
"""

import contextlib
import hashlib
import hmac
import json
import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from ledger.core.state import STATE_FORMAT
from ledger.edges.fileio import (
    ByIdentity,
    atomic_write,
    exclusive_create,
    file_identity,
    read_regular,
)
from ledger.edges.files import keptstate
from ledger.edges.files.counterbuckets import BUCKETS, SLOT, CounterBuckets, CountersLostError
from ledger.edges.files.keyindex import (
    IndexDamagedError,
    KeyIndex,
    Sizes,
    bucket_of,
    find_in,
    lines_by_bucket,
)
from ledger.edges.files.storedcounters import StoredCounters, bind_counters, write_counters
from ledger.errors import ChainIOError, StateMismatchError

_MAC_KEY_BYTES = 32
# Where the state file names its counter buckets (``counterbuckets``), chosen
# by value. An older version's key, "counters", named buckets chosen by
# budget and value.
_BUCKETS_KEY = "value_buckets"
# MAC keys this process has read, by the identity of their file.
_MAC_KEYS_SEEN: ByIdentity[bytes] = ByIdentity()


class StoredState(NamedTuple):
    """Derived state and the chain head it reflects."""

    head_hash: str | None
    size: int
    data: dict[str, Any]
    # False for a state saved before the key index recorded its sizes: it is
    # rebuilt, index and all, from the chain.
    index_complete: bool = True


class StateFile:
    """The derived-state file of one home."""

    def __init__(self, directory: Path, mac_key_path: Path) -> None:
        self.path = directory / "derived.json"
        self.mac_key_path = mac_key_path
        self.index = KeyIndex(directory / "index")
        # The budgets' counters (``ledger.edges.files.counterbuckets``).
        self.counters = directory / "counters"
        # The key index's bucket sizes, as the state last loaded or saved records them.
        self._index_sizes: Sizes | None = None

    def _mac_key(self, *, create: bool) -> bytes | None:
        # Every verdict loads and saves the state; the key is read again only
        # when its file is another one (``identity_of_stat``).
        identity = file_identity(self.mac_key_path)
        known = _MAC_KEYS_SEEN.get(identity)
        if known is not None:
            return known
        key = self._read_mac_key(create=create)
        if identity is not None and key is not None:
            _MAC_KEYS_SEEN.keep(key, identity)
        return key

    def _read_mac_key(self, *, create: bool) -> bytes | None:
        # Read without blocking: a FIFO or a directory in its place is an I/O
        # failure (ChainIOError), never a read that waits forever.
        try:
            return read_regular(self.mac_key_path)
        except FileNotFoundError:
            if not create:
                return None
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.mac_key_path}: {exc.strerror}") from exc
        with contextlib.suppress(FileExistsError):
            exclusive_create(self.mac_key_path, os.urandom(_MAC_KEY_BYTES), 0o600)
        try:
            return read_regular(self.mac_key_path)
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.mac_key_path}: {exc.strerror}") from exc

    def load(self) -> StoredState | None:
        """The stored state, or ``None`` when there is none.

        Raises:
            StateMismatchError: the file exists but is unreadable, malformed, or
                its MAC does not match (edited).
            ChainIOError: the MAC key cannot be read.
        """
        kept = keptstate.current()
        raw: bytes | object | None = keptstate.MISSING
        if kept is not None:
            raw = kept.lookup(keptstate.absolute(self.path))
            if raw is None:
                self._index_sizes = {}
                return None
            if isinstance(raw, keptstate.KeptDocument):
                # Saved by this process and not changed on disk since: lent as is.
                document = raw.document
                self._index_sizes = dict(document["index"])
                return StoredState(document["head_hash"], document["size"], document["data"])
        try:
            if not isinstance(raw, bytes):
                raw = read_regular(self.path)
        except FileNotFoundError:
            self._index_sizes = {}
            return None
        except OSError as exc:
            raise StateMismatchError(f"derived state unreadable: {exc.strerror}") from exc
        body, _, mac = raw.rstrip(b"\n").rpartition(b"\n")
        key = self._mac_key(create=False)
        if key is None:
            raise StateMismatchError("derived state present but its MAC key is missing")
        expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode("ascii")
        if not hmac.compare_digest(expected, mac):
            raise StateMismatchError("derived state does not match its MAC (edited?)")
        try:
            document = json.loads(body)
            if document["format"] != STATE_FORMAT:
                raise StateMismatchError("derived state has an unknown format")
            if "counters" in document:
                # Buckets chosen by budget and value, by an older version: the
                # counters are not where this one looks, so the state is
                # rebuilt from the chain.
                self._index_sizes = {}
                return None
            index = document.get("index")
            self._index_sizes = dict(index) if isinstance(index, dict) else {}
            counters = document.get(_BUCKETS_KEY)
            if counters is not None:  # absent: kept inline, by an older version
                if not isinstance(counters, str) or len(counters) not in (0, BUCKETS * SLOT):
                    raise StateMismatchError("derived state malformed: counters")
                directory = Path(keptstate.absolute(self.counters))
                bind_counters(document["data"], CounterBuckets(directory, counters))
            return StoredState(
                document["head_hash"], int(document["size"]), document["data"], index is not None
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StateMismatchError(f"derived state malformed: {exc}") from exc

    def save_state(self, head_hash: str | None, size: int, data: dict[str, Any]) -> None:
        """Replace the stored state.

        Raises:
            ChainIOError: the file cannot be written.
        """
        document = {
            "format": STATE_FORMAT,
            "head_hash": head_hash,
            "size": size,
            "data": data,
            "index": dict(self._sizes()),
        }
        key = self._mac_key(create=True)
        assert key is not None  # noqa: S101 - create=True always yields a key
        kept = keptstate.current()
        if kept is not None:
            # Encoded when the file is written, not per save: a save costs the
            # same whatever the size of the state.
            encoded: list[CounterBuckets] = []

            def encode(held: dict[str, Any]) -> bytes:
                raw, buckets = self._encode(held, key)
                encoded[:] = [buckets]
                return raw

            def written() -> None:
                for buckets in encoded:
                    buckets.remove_obsolete()

            kept.keep(
                keptstate.absolute(self.path), keptstate.KeptDocument(document, encode, written)
            )
            return
        raw, buckets = self._encode(document, key)
        atomic_write(self.path, raw, 0o600, durable=False)
        buckets.remove_obsolete()

    def _encode(self, document: dict[str, Any], key: bytes) -> tuple[bytes, CounterBuckets]:
        """The state file's bytes, the counters it names written first.

        Raises:
            ChainIOError: the counters cannot be written; when a bucket lost
                records, the state is dropped too, so it is rebuilt from the chain.
        """
        fresh = CounterBuckets(Path(keptstate.absolute(self.counters)))
        try:
            buckets = write_counters(document["data"], fresh)
        except CountersLostError as exc:
            self.delete()
            raise ChainIOError(f"{exc}: derived state dropped, rebuilt on next use") from exc
        document[_BUCKETS_KEY] = buckets.table()
        return _sealed(document, key), buckets

    def delete(self) -> None:
        """Remove the stored state (it is rebuilt from the chain on next use).

        Raises:
            ChainIOError: something is there that cannot be removed.
        """
        self._index_sizes = {}
        try:
            self.index.remove()
            _remove_tree(self.counters)
        except OSError as exc:
            raise ChainIOError(f"cannot remove the key index: {exc.strerror}") from exc
        kept = keptstate.current()
        if kept is not None:
            kept.drop_appends(keptstate.absolute(self.path))
            kept.keep(keptstate.absolute(self.path), None)
            return
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ChainIOError(f"cannot remove {self.path}: {exc.strerror}") from exc

    # The key index (``ledger.edges.files.keyindex``): idempotency keys and
    # served request ids, appended per save, never fsync'd, its bucket sizes
    # recorded in the state file so a lost append is noticed.

    def _sizes(self) -> Sizes:
        if self._index_sizes is None:
            with contextlib.suppress(StateMismatchError):
                self.load()
        if self._index_sizes is None:
            self._index_sizes = {}
        return self._index_sizes

    def load_key(self, key: str) -> dict[str, Any] | None:
        """The index record of ``key``; ``None`` when absent (or edited).

        Raises:
            StateMismatchError: the key's bucket lost records (search the chain).
        """
        try:
            mac_key = self._mac_key(create=False)
        except ChainIOError as exc:
            raise StateMismatchError(str(exc)) from exc
        if mac_key is None:
            return None
        bucket = bucket_of(key)
        kept = keptstate.current()
        pending = b"" if kept is None else kept.pending(keptstate.absolute(self.path), bucket)
        # The recorded size counts appends held in memory and not written yet.
        on_disk = max(0, self._sizes().get(bucket, 0) - len(pending))
        return find_in(self.index.read(bucket, on_disk) + pending, key, mac_key)

    def save_keys(self, records: list[dict[str, Any]], *, replace: bool = False) -> None:
        """Add key index records (a lookup finds the first record of a key).

        ``replace`` makes the index exactly ``records`` (a rebuild from a full fold).

        Raises:
            ChainIOError: the index cannot be written; when it lost records, the
                state is dropped too, so both are rebuilt from the chain.
        """
        mac_key = self._mac_key(create=True)
        assert mac_key is not None  # noqa: S101 - create=True always yields a key
        grouped = lines_by_bucket(records, mac_key)
        kept = keptstate.current()
        owner = keptstate.absolute(self.path)
        if replace:
            if kept is not None:
                kept.drop_appends(owner)
            self._index_sizes = self.index.replace(grouped)
            return
        sizes = self._sizes()
        for bucket, lines in grouped.items():
            recorded = sizes.get(bucket, 0)
            try:
                if kept is not None:
                    # Written later, maybe from another working directory: kept absolute.
                    index = KeyIndex(Path(keptstate.absolute(self.index.directory)))
                    sizes[bucket] = kept.keep_append(owner, index, bucket, lines, recorded)
                else:
                    sizes[bucket] = self.index.append(bucket, lines, recorded)
            except IndexDamagedError as exc:
                self.delete()
                raise ChainIOError(f"{exc}: derived state dropped, rebuilt on next use") from exc


def _remove_tree(directory: Path) -> None:
    doomed = directory.with_name(f".{directory.name}.old-{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        directory.replace(doomed)
        shutil.rmtree(doomed, ignore_errors=True)


def _in_buckets(value: object) -> None:
    # Counters kept in their buckets are named by the buckets' sizes, not inlined.
    if isinstance(value, StoredCounters):
        return
    raise TypeError(f"cannot store {type(value).__name__} in the derived state")


def _sealed(document: dict[str, Any], mac_key: bytes) -> bytes:
    """A state document as its file holds it: canonical JSON, then its MAC, a line each."""
    body = json.dumps(document, sort_keys=True, separators=(",", ":"), default=_in_buckets).encode(
        "utf-8"
    )
    mac = hmac.new(mac_key, body, hashlib.sha256).hexdigest().encode("ascii")
    return body + b"\n" + mac + b"\n"
