"""Derived state a long-lived process keeps in memory between writes of its file.

Replacing ``state/derived.json`` (write a temporary file, rename it over the
old one) costs ext4 a flush of the new file's blocks (its ``auto_da_alloc``
guard against zero-length files after a crash): about 0.3 ms here, more than
the rest of a verdict. ``ledger serve`` decides thousands of verdicts a second,
so it keeps the newest state in memory and writes the file at most every
``WRITE_EVERY_SECONDS``, after a group commit's fsync, and when it stops.

Nothing is trusted that another process could have changed. Each kept state
remembers the identity of the file it supersedes (device, inode, size, mtime
and ctime, which any write changes): when the file on disk is no longer that
one (an in-process writer, ``rebuild-state``, ``recover``), the kept state is
dropped and the file is read, and a kept state is never written over it. A
kept state is only ever behind the chain, never ahead: it is taken only from
saves made in a group whose appends were made durable, or dropped with it.
A file left behind by a crash is caught up like any state that lags the chain.

Records for the key index (``ledger.edges.files.indexdb``) are kept the same
way, owned by the state file they go with: they are written just before it,
and dropped with it.

A state is kept as its document (``KeptDocument``), not as bytes: a save costs
nothing whatever the state's size (a budget may count thousands of sessions),
and the document is encoded and authenticated only when its file is written.
A load lends the document itself to the caller, who changes it in place and
saves it back; a document lent and never saved back (a job that failed between
its fold and its save) may hold changes its recorded head does not account
for, so it is dropped and the file, which lags, is caught up from the chain.
"""

import contextlib
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ledger.edges.clock import monotonic
from ledger.edges.fileio import FileIdentity, atomic_write, file_identity
from ledger.errors import ChainIOError, LedgerError

WRITE_EVERY_SECONDS = 0.5

MISSING = object()


class KeptDocument:
    """A state document held in memory, and how to encode it for its file."""

    __slots__ = ("document", "encode", "lent", "written")

    def __init__(
        self,
        document: Any,
        encode: Callable[[Any], bytes],
        written: Callable[[], None] | None = None,
    ) -> None:
        self.document = document
        self.encode = encode
        self.lent = False
        # Called once the encoded file is in place (files it superseded can go).
        self.written = written


class KeptStates:
    """State files' newest contents, held in memory by a long-lived process."""

    def __init__(self) -> None:
        self._raw: dict[str, bytes | KeptDocument | None] = {}  # None: to be removed
        self._supersedes: dict[str, FileIdentity | None] = {}
        self._dirty: set[str] = set()
        # Key index records not written yet, by the state file that owns them:
        # (how to write them, the records).
        self._appends: dict[str, tuple[Callable[[list[Any]], None], list[Any]]] = {}
        self._written_at = monotonic()

    def lookup(self, name: str) -> object:
        """The kept content of ``name``; ``MISSING`` when none is kept or the file changed."""
        if name not in self._raw:
            return MISSING
        if file_identity(name) != self._supersedes[name]:
            self._drop(name)  # written by someone else since: theirs is newer
            return MISSING
        raw = self._raw[name]
        if isinstance(raw, KeptDocument):
            if raw.lent:
                self._drop(name)  # lent and never saved back: it cannot be trusted
                return MISSING
            raw.lent = True
        return raw

    def keep(self, name: str, raw: bytes | KeptDocument | None) -> None:
        """Hold ``raw`` (``None``: removal) as the newest content of ``name``."""
        if name not in self._supersedes:
            self._supersedes[name] = file_identity(name)
        if self._supersedes[name] is None:
            # No file to compare against: a removal by someone else (``recover``)
            # would look like no change. Write at the end of this group instead.
            self._written_at = -WRITE_EVERY_SECONDS
        self._raw[name] = raw
        self._dirty.add(name)

    def keep_records(
        self, owner: str, write: Callable[[list[Any]], None], records: list[Any]
    ) -> None:
        """Hold key index records, written (by ``write``) before ``owner``."""
        _, held = self._appends.setdefault(owner, (write, []))
        held.extend(records)

    def pending(self, owner: str) -> list[Any]:
        """Key index records held for ``owner`` and not written yet."""
        held = self._appends.get(owner)
        return held[1] if held is not None else []

    def drop_appends(self, owner: str) -> None:
        """Forget the key index appends held for ``owner`` (its index was replaced)."""
        self._appends.pop(owner, None)

    def due(self, interval: float | None = None) -> bool:
        """Whether the files should be written now (``interval``, else the usual, has passed)."""
        wait = WRITE_EVERY_SECONDS if interval is None else interval
        return bool(self._dirty) and monotonic() - self._written_at >= wait

    def pending_records(self) -> bool:
        """Whether key index records are held, not written yet."""
        return bool(self._appends)

    def unwritten(self) -> bool:
        """Whether anything kept is not on disk yet (index records or a changed file)."""
        return bool(self._appends) or bool(self._dirty)

    def write_some_records(self, rows: int | None) -> None:
        """Write up to ``rows`` held key index records (``None``: all), the oldest first.

        No state file is written. What is left stays held, and ``pending`` still
        answers for it; the state files that own the records are written, after
        the rest, by ``write``.

        Raises:
            ChainIOError: the index could not be written.
        """
        for owner, (write, records) in sorted(self._appends.items(), key=lambda item: item[0]):
            if rows is not None and rows <= 0:
                return
            if owner in self._supersedes and file_identity(owner) != self._supersedes[owner]:
                self._drop(owner)  # another writer folded these entries itself
                continue
            part = records if rows is None else records[:rows]
            try:
                write(part)
            except ChainIOError:
                self._drop(owner)
                _remove(Path(owner))
                raise
            if rows is None:
                self._appends.pop(owner, None)
                continue
            del records[: len(part)]  # in place: ``pending`` hands out this list
            rows -= len(part)
            if not records:
                self._appends.pop(owner, None)

    def write_or_log(self, log: Callable[[str], None]) -> None:
        """``write``, a failure logged rather than raised.

        Derived state only: a file that could not be written lags, and the
        next reader folds from the chain what it lacks.
        """
        try:
            self.write()
        except LedgerError as exc:
            log(f"could not write derived state: {exc}")

    def write(self) -> None:
        """Write every changed file, unless another process wrote it first.

        Call it under the chain lock, after the saves' entries are durable.

        Raises:
            ChainIOError: a file could not be written (its state then lags and
                is caught up from the chain; the memory of it is dropped).
        """
        self._written_at = monotonic()
        for name, raw in list(self._raw.items()):
            if isinstance(raw, KeptDocument) and raw.lent:
                # Lent and never saved back: neither it nor its index appends are
                # written; the file and the index on disk agree, and lag.
                self._drop(name)
        self.write_some_records(None)  # every record, each before the state file that owns it
        for name in sorted(self._dirty):
            raw = self._raw[name]
            if file_identity(name) != self._supersedes[name]:
                self._drop(name)
                continue
            kept_document = raw if isinstance(raw, KeptDocument) else None
            encoded = raw.encode(raw.document) if isinstance(raw, KeptDocument) else raw
            try:
                if encoded is None:
                    _remove(Path(name))
                else:
                    atomic_write(Path(name), encoded, 0o600, durable=False)
            except ChainIOError:
                self._drop(name)
                raise
            if kept_document is not None and kept_document.written is not None:
                kept_document.written()
            self._supersedes[name] = file_identity(name)
            self._dirty.discard(name)

    def forget(self) -> None:
        """Drop everything kept (a group whose appends were rolled back)."""
        self._raw.clear()
        self._supersedes.clear()
        self._dirty.clear()
        self._appends.clear()

    def _drop(self, name: str) -> None:
        self._raw.pop(name, None)
        self._supersedes.pop(name, None)
        self._dirty.discard(name)
        self._appends.pop(name, None)


_KEPT: ContextVar[KeptStates | None] = ContextVar("ledger_kept_state", default=None)


@contextlib.contextmanager
def keeping(states: KeptStates) -> Iterator[KeptStates]:
    """State saves and loads in the block go through ``states``."""
    token = _KEPT.set(states)
    try:
        yield states
    finally:
        _KEPT.reset(token)


def current() -> KeptStates | None:
    """The kept states in effect, if any."""
    return _KEPT.get()


def absolute(path: Path) -> str:
    """The name a state file is kept under: absolute, as the request that saved it saw it."""
    # Files are written later, from the server's own working directory.
    name = os.fspath(path)
    return name if name.startswith("/") else os.path.abspath(name)  # noqa: PTH100 - keep links


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise ChainIOError(f"cannot remove {path}: {exc.strerror}") from exc
