"""``events.jsonl`` on a local disk: locking, appending, reading.

Appends happen under an exclusive ``flock`` on ``events.jsonl.lock`` held across
read-tail, hash, sign, append and fsync (SPEC §2). Reading the tail costs the
same at any chain length: the last line is found by reading backwards from the
end. A torn last line is reported, never repaired here: ``ledger recover`` owns
repairs.

The chain path must be a regular file. Every open is non-blocking and checked
with ``fstat`` first, so a FIFO, a directory or a device at the path is an I/O
failure found at once (SPEC §4), never a read that waits forever. The home's
chain is never reached through a symbolic link: its lock lives beside the path,
so a link to another home's chain would let two homes append under two locks.

Verifying the whole chain (in parallel byte ranges when it is large) lives in
``ledger.edges.files.chainverify``; ``ChainFile.verify`` delegates to it.
"""

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.edges.fileio import (
    FileIdentity,
    describe_mode,
    fsync_dir,
    identity_of_stat,
    open_regular,
)
from ledger.edges.files.chainlines import ChainLines
from ledger.edges.files.groupcommit import GroupCommit, joined
from ledger.edges.locks import exclusive_lock, shared_lock
from ledger.errors import ChainIOError, TornTailError

if TYPE_CHECKING:
    from ledger.core.chain import ChainReport
    from ledger.core.trust import TrustStore

_TAIL_READ = 8192


class CorruptTailError(ChainIOError):
    """The last line is complete but not a valid entry; nothing may follow it."""


class ChainHead(NamedTuple):
    """What an append needs to know of the chain: its last entry and its size."""

    entry_hash: str
    ts_utc: str
    size: int
    event_type: str


def read_last_line(fd: int, size: int) -> tuple[bytes, int]:
    """The last line of a file (with its ``\\n``) and the offset where it starts."""
    end = size
    chunks: list[bytes] = []
    position = end
    while position > 0:
        step = min(_TAIL_READ, position)
        position -= step
        block = os.pread(fd, step, position)
        search_end = len(block) - 1 if not chunks else len(block)
        cut = block.rfind(b"\n", 0, search_end)
        if cut != -1:
            chunks.append(block[cut + 1 :])
            return b"".join(reversed(chunks)), position + cut + 1
        chunks.append(block)
    return b"".join(reversed(chunks)), 0


class ChainTransaction:
    """The chain while its lock is held: read the head, append whole lines."""

    def __init__(
        self, path: Path, *, follow_symlinks: bool = False, group: GroupCommit | None = None
    ) -> None:
        self._path = path
        self._follow = follow_symlinks
        self._group = group
        self._head: ChainHead | None = None
        self._head_read = False

    def head(self) -> ChainHead | None:
        """The last entry, or ``None`` for an empty chain.

        Raises:
            TornTailError: the last line has no newline (a cut write).
            CorruptTailError: the last line is not a valid entry.
            ChainIOError: the file cannot be read.
        """
        if not self._head_read:
            self._head = read_head(self._path, follow_symlinks=self._follow)
            self._head_read = True
        return self._head

    def append(self, line: bytes, *, entry_hash: str | None = None, ts_utc: str | None = None,
               event_type: str | None = None) -> None:  # fmt: skip
        """Write one complete line and fsync it; on failure leave the file as it was.

        A writer that sealed the line passes its hash, time and type so the new
        head need not be parsed back. In a group commit the fsync waits for the
        group's end (``ledger.edges.files.groupcommit``).

        Raises:
            ChainIOError: the write or fsync failed (the partial line is removed).
        """
        head = self.head()
        start = head.size if head else 0
        created = head is None and not os.path.lexists(self._path)
        try:
            fd = open_regular(
                self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, follow_symlinks=self._follow
            )
        except OSError as exc:
            raise ChainIOError(f"cannot open {self._path}: {exc.strerror}") from exc
        try:
            written = 0
            try:
                while written < len(line):
                    written += os.write(fd, line[written:])
                if self._group is None:
                    os.fsync(fd)
                found = identity_of_stat(os.fstat(fd))
            except OSError as exc:
                self._roll_back(fd, start)
                raise ChainIOError(f"cannot append to {self._path}: {exc.strerror}") from exc
        finally:
            os.close(fd)
        if self._group is not None:
            self._group.appended(created=created)
        elif created:
            fsync_dir(self._path.parent)
        if entry_hash is None or ts_utc is None or event_type is None:
            parsed = parse_line(line[:-1])
            entry_hash, ts_utc, event_type = parsed.entry_hash, parsed.ts_utc, parsed.event_type
        self._head = ChainHead(entry_hash, ts_utc, start + len(line), event_type)
        if found[2] == self._head.size:
            _KNOWN_HEADS[found[:2]] = (found, self._head)

    def _roll_back(self, fd: int, size: int) -> None:
        # Our own half-written line, under our own lock: cutting it keeps the
        # chain whole. If even that fails the tail stays torn and every writer
        # and verdict after us sees it and refuses.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
            os.fsync(fd)


def read_head(path: Path, *, follow_symlinks: bool = False) -> ChainHead | None:
    """The chain's last entry, read backwards from the end.

    Raises:
        TornTailError: the last line has no newline.
        CorruptTailError: the last line is not a valid entry.
        ChainIOError: the file cannot be read, or is not a regular file.
    """
    remembered = _known_head(path, follow_symlinks=follow_symlinks)
    if remembered is not None:
        return remembered
    try:
        fd = open_regular(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        found = identity_of_stat(os.fstat(fd))
        size = found[2]
        if size == 0:
            return None
        line, _start = read_last_line(fd, size)
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if not line.endswith(b"\n"):
        raise TornTailError(str(path))
    try:
        parsed = parse_line(line[:-1])
    except EnvelopeFormatError as exc:
        raise CorruptTailError(
            f"{path}: last line is not a valid entry ({exc}); run `ledger recover`"
        ) from exc
    head = ChainHead(parsed.entry_hash, parsed.ts_utc, size, parsed.event_type)
    _KNOWN_HEADS[found[:2]] = (found, head)
    return head


# The head last read or written in each chain file this process touched, so a
# long-lived writer (``ledger serve``, a Python API user) does not parse the
# last line again when nothing else has written since.
# Keyed by device and inode; the whole identity must match (``identity_of_stat``).
_KNOWN_HEADS: dict[tuple[int, ...], tuple[FileIdentity, ChainHead]] = {}


def _known_head(path: Path, *, follow_symlinks: bool) -> ChainHead | None:
    """The remembered head, when one ``stat`` shows the file unchanged since."""
    if not _KNOWN_HEADS:
        return None
    try:
        info = path.stat(follow_symlinks=follow_symlinks)
    except OSError:
        return None  # the open that follows reports it
    if not stat.S_ISREG(info.st_mode):
        return None
    found = identity_of_stat(info)
    known = _KNOWN_HEADS.get(found[:2])
    return known[1] if known is not None and known[0] == found and found[2] else None


class ChainFile(ChainLines):
    """The chain as a local file plus its lock file."""

    def __init__(
        self, path: Path, lock_timeout: float = 10.0, *, follow_symlinks: bool = False
    ) -> None:
        """A chain at ``path``.

        Args:
            path: the chain file.
            lock_timeout: seconds to wait for ``<path>.lock``.
            follow_symlinks: read through a symbolic link at ``path`` (an
                auditor's ``verify-chain LOG``); a home's chain refuses one.
        """
        super().__init__(path, follow_symlinks=follow_symlinks)
        # Beside the chain; a path with no name (``.``, ``/``) is refused when read.
        self.lock_path = path.parent / f"{path.name}.lock"
        self.lock_timeout = lock_timeout

    @contextlib.contextmanager
    def transaction(self) -> Iterator[ChainTransaction]:
        """Hold the chain lock for one read-decide-append step.

        Raises:
            LockTimeoutError: the lock was not free within ``lock_timeout``.
            ChainIOError: the chain path holds something other than a regular
                file, or the lock file cannot be opened.
        """
        self.check_path()
        group = joined(self.lock_path, self.lock_timeout)
        if group is not None:
            yield ChainTransaction(self.path, follow_symlinks=self.follow_symlinks, group=group)
            return
        with exclusive_lock(self.lock_path, self.lock_timeout):
            yield ChainTransaction(self.path, follow_symlinks=self.follow_symlinks)

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[ChainTransaction]:
        """A consistent read-only view: waits for a writer, creates no file.

        Raises:
            LockTimeoutError: a writer held the lock longer than ``lock_timeout``.
            ChainIOError: the chain path holds something other than a regular file.
        """
        self.check_path()
        group = joined(self.lock_path, self.lock_timeout)
        if group is not None:
            yield ChainTransaction(self.path, follow_symlinks=self.follow_symlinks, group=group)
            return
        with shared_lock(self.lock_path, self.lock_timeout):
            yield ChainTransaction(self.path, follow_symlinks=self.follow_symlinks)

    def head(self) -> ChainHead | None:
        """The last entry without taking the lock (a read-only view)."""
        return read_head(self.path, follow_symlinks=self.follow_symlinks)

    def exists(self) -> bool:
        """Whether anything is at the chain path (a dangling link counts: it is reported)."""
        if self.follow_symlinks:
            return self.path.exists()
        return os.path.lexists(self.path)

    def check_path(self) -> None:
        """Refuse, without waiting for the lock, a chain path that cannot be a chain.

        Nothing there is fine (an empty chain); a FIFO, a directory, a device
        or (for a home's chain) a symbolic link is an I/O failure (SPEC §4),
        whatever the lock says.

        Raises:
            ChainIOError: something other than a regular file is at the path.
        """
        try:
            mode = self.path.stat(follow_symlinks=self.follow_symlinks).st_mode
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.path}: {exc.strerror}") from exc
        if not stat.S_ISREG(mode):
            raise ChainIOError(f"cannot read {self.path}: {describe_mode(mode)}")

    def verify(
        self,
        trust: "TrustStore",
        *,
        strict: bool = False,
        allow_markers: bool = False,
        workers: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        end: int | None = None,
    ) -> "ChainReport":
        """Verify the file up to byte ``end`` (all of it when ``None``), in parallel.

        See ``ledger.edges.files.chainverify.verify_file``.

        Raises:
            ChainIOError: the file cannot be read.
        """
        from ledger.edges.files.chainverify import verify_file

        return verify_file(
            self,
            trust,
            strict=strict,
            allow_markers=allow_markers,
            workers=workers,
            progress=progress,
            end=end,
        )

    def verify_range(
        self,
        trust: "TrustStore",
        strict: bool,
        allow_markers: bool,
        start: int,
        end: int | None,
        *,
        from_genesis: bool,
    ) -> "ChainReport":
        """Verify the lines in a byte range (from ``GENESIS`` for the first range)."""
        from ledger.edges.files.chainverify import verify_range

        return verify_range(
            self, trust, strict, allow_markers, start, end, from_genesis=from_genesis
        )

    def hash_of_entry(self, number: int, *, allow_markers: bool = False) -> str | None:
        """The hash of entry ``number`` (counting from 1), or ``None`` if absent."""
        seen = 0
        for raw in self.iter_lines():
            if allow_markers and raw.startswith(b"["):
                continue
            seen += 1
            if seen == number:
                try:
                    return parse_line(raw.rstrip(b"\n")).entry_hash
                except EnvelopeFormatError:
                    return None
        return None
