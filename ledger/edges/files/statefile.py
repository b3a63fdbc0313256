"""Derived state on disk: ``state/derived.json``, bound to the chain head by a MAC.

The file records which chain head it reflects (hash and byte size). A keyed
MAC (HMAC-SHA256, key in ``keys/state-mac.key``, mode 0600) makes an edit of
the file detectable. The file is replaced atomically but not fsync'd: after a
power loss it may lag the chain, which the gate catches up by verifying the
missing tail, or it may be unreadable, which the gate treats as a mismatch
(``counter_inconsistent`` until ``ledger rebuild-state``).

The indexes derived with it (idempotency keys, served request ids, entry refs
and budgets' per-value counters) live in ``state/index.sqlite3``
(``ledger.edges.files.indexdb``), written before the file; the file records
the number (``index_seq``) of the index save that goes with it. A file whose
number the index no longer knows (a power loss took its newest commits, or
the index is missing, or the home was kept by an older version with bucket
files) is rebuilt, index and all, from the verified chain.

Inside ``ledger.edges.files.keptstate.keeping`` (the resident gate) saves and loads
go through memory, and the file is written from there now and then.
"""

import contextlib
import hashlib
import hmac
import json
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NamedTuple

from ledger.core.state import STATE_FORMAT
from ledger.edges.fileio import atomic_write, read_regular, remove_tree
from ledger.edges.files import keptstate, stateindex
from ledger.edges.files.countertable import CountersLostError, CounterTable
from ledger.edges.files.indexdb import IndexDb, Position, RefMatch
from ledger.edges.files.statemac import mac_key, sealed
from ledger.edges.files.statepoints import StatePoint, StatePoints
from ledger.edges.files.storedcounters import bind_counters, write_counters
from ledger.edges.locks import exclusive_lock
from ledger.errors import ChainIOError, StateMismatchError

# How long a verdict waits for another process counting changed budgets (it
# holds no chain lock meanwhile); past that, its own load counts them.
RESTATE_WAIT_SECONDS = 600.0

# The number of the index save the state file goes with.
_SEQ_KEY = "index_seq"
# What older versions kept beside the file, removed when the index replaces them.
_RETIRED = ("index", "keys", "counters")


class StoredState(NamedTuple):
    """Derived state and the chain head it reflects."""

    head_hash: str | None
    size: int
    data: dict[str, Any]
    # False when the index cannot answer for the state (it lost commits, or
    # the state is an older version's): it is rebuilt, index and all.
    index_complete: bool = True


class StateFile:
    """The derived-state file of one home, and its index."""

    def __init__(self, directory: Path, mac_key_path: Path, idempotency_days: int = 35) -> None:
        self.path = directory / "derived.json"
        # Absolute: a resident gate writes the index later, from its own directory.
        self.mac_key_path = Path(keptstate.absolute(mac_key_path))
        self.directory = Path(keptstate.absolute(directory))
        self.index_path = self.directory / "index.sqlite3"
        self.idempotency_days = idempotency_days
        self._index: IndexDb | None = None
        # The index save the state last loaded or saved goes with.
        self._seq: int | None = None
        # Whether the index was dropped (``delete``) since: a state loaded
        # before then may not be saved, unless the index is made afresh
        # (``save_keys(replace=True)``) for a state folded from the whole chain.
        self._dropped = False
        self.points = StatePoints(self.directory / "points", self.mac_key_path)

    def restating(self, timeout: float = RESTATE_WAIT_SECONDS) -> AbstractContextManager[None]:
        """Held while one process counts changed budgets afresh (``budget_restate``).

        Raises:
            LockTimeoutError: another process held it ``timeout`` seconds.
            ChainIOError: the lock file cannot be opened.
        """
        return exclusive_lock(self.directory / "restate.lock", timeout)

    def keep_point(self, entries: int, size: int, head_hash: str, data: dict[str, Any]) -> bool:
        """Keep ``data``, folded up to entry ``entries``, as a point (``statepoints``)."""
        return self.points.keep(entries, size, head_hash, data)

    def carry_points_over(self, before: str, after: str) -> None:
        """Mark the points verified under trust store ``before`` as verified under ``after``."""
        self.points.carry_trust_over(before, after)

    def nearest_point(self, before_line: int) -> StatePoint | None:
        """The newest point folded to an entry before line ``before_line``, if any."""
        return self.points.nearest(before_line)

    def index(self, *, create: bool = False) -> IndexDb | None:
        """The home's derived index (``None`` without a MAC key, unless ``create``).

        Raises:
            ChainIOError: the MAC key cannot be read, or the folder made.
        """
        key = mac_key(self.mac_key_path, create=create)
        if key is None:
            return None
        return self._index_for(key, create=create)

    def _index_for(self, key: bytes, *, create: bool = False) -> IndexDb:
        """The index under MAC key ``key`` (its folder made when ``create``)."""
        if self._index is None or self._index.key != key:
            if create:
                try:
                    self.directory.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise ChainIOError(f"cannot create {self.directory}: {exc.strerror}") from exc
            self._index = IndexDb(self.index_path, key)
        return self._index

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
                self._seq = None
                return None
            if isinstance(raw, keptstate.KeptDocument):
                # Saved by this process and not changed on disk since: lent as is.
                document = raw.document
                self._seq = document.get(_SEQ_KEY)
                return StoredState(document["head_hash"], document["size"], document["data"])
        try:
            if not isinstance(raw, bytes):
                raw = read_regular(self.path)
        except FileNotFoundError:
            self._seq = None
            return None
        except OSError as exc:
            raise StateMismatchError(f"derived state unreadable: {exc.strerror}") from exc
        body, _, mac = raw.rstrip(b"\n").rpartition(b"\n")
        key = mac_key(self.mac_key_path, create=False)
        if key is None:
            raise StateMismatchError("derived state present but its MAC key is missing")
        expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode("ascii")
        if not hmac.compare_digest(expected, mac):
            raise StateMismatchError("derived state does not match its MAC (edited?)")
        try:
            document = json.loads(body)
            if document["format"] != STATE_FORMAT:
                raise StateMismatchError("derived state has an unknown format")
            seq = document.get(_SEQ_KEY)
            self._seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
            stored = StoredState(document["head_hash"], int(document["size"]), document["data"])
            index = self._index_for(key)
            if self._seq is None or not stateindex.knows(index, self._seq):
                # Kept by an older version (bucket files), or the index lost the
                # save this state goes with: rebuilt, index and all, from the chain.
                self._seq = None
                return stored._replace(index_complete=False)
            bind_counters(document["data"], CounterTable(index, self._seq))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StateMismatchError(f"derived state malformed: {exc}") from exc
        return stored

    def check_index(self) -> None:
        """Check every row and link of the derived index (``rebuild-state``; O(rows)).

        Raises:
            StateMismatchError: a row was edited, added or removed.
        """
        index = self.index()
        if index is not None and Path(index.path).exists():
            index.check_all()

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
            _SEQ_KEY: self._seq,
        }
        key = mac_key(self.mac_key_path, create=True)
        assert key is not None  # noqa: S101 - create=True always yields a key
        kept = keptstate.current()
        if kept is not None:
            # Encoded when the file is written, not per save: a save costs the
            # same whatever the size of the state.
            kept.keep(
                keptstate.absolute(self.path),
                keptstate.KeptDocument(document, lambda held: self._encode(held, key)),
            )
            return
        atomic_write(self.path, self._encode(document, key), 0o600, durable=False)

    def _encode(self, document: dict[str, Any], key: bytes) -> bytes:
        """The state file's bytes, the counters it names written to the index first.

        Raises:
            ChainIOError: the counters cannot be written; when the index no
                longer knows the state, the state is dropped too, so it is
                rebuilt from the chain.
        """
        index = self._index_for(key, create=True)
        loaded = document.get(_SEQ_KEY)
        try:
            table = write_counters(document["data"], CounterTable(index, loaded or 0))
            with index.writing() as tx:
                known = newest, floor = tx.meta()
                seq = newest + 1
                if loaded is None and self._dropped:
                    # The index was dropped since this state was loaded: a
                    # state saved now would vouch for keys the index lost.
                    raise CountersLostError("the derived index was dropped")
                if table.replacing:
                    if table.changes or tx.has_counters():
                        # Every counter written afresh: no older state is answered for.
                        tx.clear(("counters",))
                        floor = seq
                elif loaded is None or not floor <= loaded <= newest:
                    # Counters read from an index that since lost or dropped them.
                    raise CountersLostError("the derived index no longer knows the state")
                else:
                    floor = max(floor, loaded)
                tx.save_counters(table.changes, loaded or 0, seq)
                stateindex.drop_old_epochs(tx, document["data"])
                tx.set_meta(seq, floor, known)
        except CountersLostError as exc:
            self.delete()
            raise ChainIOError(f"{exc}: derived state dropped, rebuilt on next use") from exc
        table.seq, table.changes, table.replacing = seq, [], False
        document[_SEQ_KEY] = self._seq = seq
        return sealed(document, key)

    def delete(self) -> None:
        """Remove the stored state and its index (rebuilt from the chain on next use).

        Raises:
            ChainIOError: something is there that cannot be removed.
        """
        self._seq = None
        self._dropped = True
        try:
            IndexDb(self.index_path, b"").remove()
            for name in _RETIRED:
                remove_tree(self.directory / name)
        except OSError as exc:
            raise ChainIOError(f"cannot remove the derived index: {exc.strerror}") from exc
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

    # The key index: idempotency keys and served request ids, and entry refs,
    # written per save in one transaction, never fsync'd.

    def load_key(self, key: str) -> dict[str, Any] | list[Position] | None:
        """The index record of ``key``; else where its cold tag points; ``None`` when absent.

        Raises:
            StateMismatchError: the index cannot answer (edited or unreadable):
                search the chain.
        """
        kept = keptstate.current()
        if kept is not None:
            for record in kept.pending(keptstate.absolute(self.path)):
                if record.get("key") == key:
                    return dict(record)
        try:
            index = self.index()
        except ChainIOError as exc:
            raise StateMismatchError(str(exc)) from exc
        if index is None:
            return None
        try:
            return index.find_key(key)
        except StateMismatchError:
            self._drop_damaged()
            raise

    def find_refs(self, prefix: str, limit: int = 2) -> list[RefMatch]:
        """Indexed entries whose hash begins with ``prefix`` (up to ``limit``).

        Raises:
            StateMismatchError: the index cannot answer (edited or unreadable).
        """
        kept = keptstate.current()
        found: dict[str, RefMatch] = {}
        if kept is not None:
            for record in kept.pending(keptstate.absolute(self.path)):
                if "ref" in record and record["ref"].startswith(prefix):
                    found[record["ref"]] = RefMatch(record["ref"], stateindex.position(record))
        try:
            index = self.index()
        except ChainIOError as exc:
            raise StateMismatchError(str(exc)) from exc
        if index is not None:
            try:
                matches = index.find_refs(prefix, limit)
            except StateMismatchError:
                self._drop_damaged()
                raise
            for match in matches:
                found.setdefault(match.entry_hash, match)
        return sorted(found.values())[:limit]

    def _drop_damaged(self) -> None:
        """An index row failed its MAC: state and index go, rebuilt from the chain on next use."""
        with contextlib.suppress(ChainIOError):
            self.delete()

    def save_keys(
        self,
        records: list[dict[str, Any]],
        *,
        replace: bool = False,
        refs: Iterable[tuple[str, int, int | None]] = (),
    ) -> None:
        """Add key records (a lookup finds the first record of a key) and entry refs.

        ``replace`` makes the index exactly these (a rebuild from a full fold).

        Raises:
            ChainIOError: the index cannot be written (the state is dropped
                then, so both are rebuilt from the chain).
        """
        kept = keptstate.current()
        owner = keptstate.absolute(self.path)
        if replace:
            if kept is not None:
                kept.drop_appends(owner)
            self._write_records(records, refs, replace=True)
            self._dropped = False
            for name in _RETIRED:
                remove_tree(self.directory / name)
            return
        if kept is not None:
            held = [*records, *({"ref": h, "entry": n, "offset": o} for h, n, o in refs)]
            kept.keep_records(owner, self._write_records, held)
            return
        self._write_records(records, refs)

    def spill(self, records: list[dict[str, Any]], refs: Any, *, replace: bool = False) -> None:
        """Write a fold's index records so far (a fold from line 1: the first batch replaces).

        A state folded afresh under the chain lock (it was missing, or verified
        under another trust store) writes its records as they come instead of
        holding them all until it is saved: a fold of ten million entries held
        3 GiB. A fold cut short leaves an index no saved state goes with: the
        next use folds afresh, as it would have.

        Raises:
            ChainIOError: the index cannot be written (the state is dropped).
        """
        if replace:
            index = self.index(create=True)
            assert index is not None  # noqa: S101 - create=True always yields one
            index.unmapped()
            self.save_keys(records, replace=True, refs=refs)
        else:
            # Straight to the index, never held in memory by a long-lived process.
            self._write_records(records, refs)

    def _write_records(
        self,
        records: list[dict[str, Any]],
        refs: Iterable[tuple[str, int, int | None]] = (),
        *,
        replace: bool = False,
    ) -> None:
        index = self.index(create=True)
        assert index is not None  # noqa: S101 - create=True always yields one
        cutoff = stateindex.cutoff(records, self.idempotency_days)
        held_refs = [(r["ref"], r["entry"], r.get("offset")) for r in records if "ref" in r]
        try:
            with index.writing() as tx:
                if replace:
                    newest, _floor = tx.meta()
                    tx.clear()
                    # No state saved before this one can be answered for now.
                    tx.set_meta(newest + 1, newest + 1)
                tx.add_keys((r for r in records if "key" in r), cutoff)
                tx.add_refs(
                    (entry_hash, Position(0, entry, offset))
                    for entry_hash, entry, offset in (*held_refs, *refs)
                )
                if cutoff is not None:
                    tx.expire_keys(cutoff)
        except StateMismatchError as exc:
            self.delete()
            raise ChainIOError(f"{exc}: derived state dropped, rebuilt on next use") from exc
