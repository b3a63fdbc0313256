"""``events.jsonl`` on a local disk: locking, appending, reading.

Appends happen under an exclusive ``flock`` on ``events.jsonl.lock`` held across
read-tail, hash, sign, append and fsync (SPEC §2); the head is read by
``ledger.edges.files.chainhead``. A home's chain is sealed in segments
(``sealing``): ``events.jsonl`` is then the open one, and positions count the
bytes of the whole chain (``chainview``).

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
from typing import TYPE_CHECKING

from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.edges.fileio import describe_mode, fsync_dir, identity_of_stat, open_regular
from ledger.edges.files.chainhead import (
    ChainHead,
    CorruptTailError,
    chain_head,
    read_head,
    read_last_line,
    remember_head,
)
from ledger.edges.files.chainlines import ChainLines
from ledger.edges.files.groupcommit import GroupCommit, joined
from ledger.edges.files.sealing import SegmentLimits, finish_interrupted_seal
from ledger.edges.files.segmentfiles import SegmentDir
from ledger.edges.locks import exclusive_lock, shared_lock
from ledger.errors import ChainIOError, LockTimeoutError

if TYPE_CHECKING:
    from ledger.core.chain import ChainReport
    from ledger.core.signing import Signer
    from ledger.core.trust import TrustStore
    from ledger.edges.files.sealing import PendingSeal

__all__ = [
    "ChainFile",
    "ChainHead",
    "ChainTransaction",
    "CorruptTailError",
    "read_head",
    "read_last_line",
]


class ChainTransaction:
    """The chain while its lock is held: read the head, append whole lines."""

    def __init__(
        self,
        path: Path,
        *,
        follow_symlinks: bool = False,
        group: GroupCommit | None = None,
        segments: SegmentDir | None = None,
        limits: SegmentLimits | None = None,
        lock: tuple[Path, float] = (Path(), 0.0),
    ) -> None:
        self._path = path
        self.lock = lock  # the lock file and its timeout, for a seal after the group
        self._follow = follow_symlinks
        self._group = group
        self.segments = segments
        self._limits = limits
        self.signer: Signer | None = None  # set when an append asks for a seal
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
            self._head = chain_head(self._path, self.segments, follow_symlinks=self._follow)
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
        created = not os.path.lexists(self._path)
        try:
            fd = open_regular(
                self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, follow_symlinks=self._follow
            )
        except OSError as exc:
            raise ChainIOError(f"cannot open {self._path}: {exc.strerror}") from exc
        try:
            written = 0
            try:
                # The open segment's own size: the head counts the sealed ones too.
                physical = os.fstat(fd).st_size
                while written < len(line):
                    written += os.write(fd, line[written:])
                if self._group is None:
                    os.fsync(fd)
                found = identity_of_stat(os.fstat(fd))
            except OSError as exc:
                self._roll_back(fd, physical)
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
        if found[2] == physical + len(line):
            remember_head(found, self._head, physical, line)

    def seal_if_due(self, signer: "Signer") -> None:
        """Seal the open segment when it reached its limit (``ledger.edges.files.sealing``).

        Outside a group the bytes are compressed after this transaction lets
        the lock go (``ChainFile.transaction``), and committed under it a
        moment. In a group commit it is decided at the group's end, when its
        appends are durable, and carried out once the group lets the lock go.
        A seal that fails leaves the chain whole and is tried again later.
        """
        if self.segments is None or self._limits is None:
            return
        group = self._group
        if group is None:
            self.signer = signer
        elif "seal" not in group.memo:
            group.memo["seal"] = True
            group.after_commit.append(lambda: self._seal_in_group(signer))

    def _seal_in_group(self, signer: "Signer") -> None:
        """At the group's end, under its lock: decide; compress once the lock is let go."""
        from ledger.edges.files.sealing import seal, seal_due

        # Another transaction of the group may have appended since this one.
        head = chain_head(self._path, self.segments, follow_symlinks=self._follow)
        segments, limits, group = self.segments, self._limits, self._group
        if head is None or segments is None or limits is None or group is None:
            return
        pending = None
        with contextlib.suppress(ChainIOError):
            pending = seal_due(self._path, segments, limits, head)
        if pending is None:
            return
        lock_path, timeout = self.lock

        def carry_out() -> None:
            def locked() -> contextlib.AbstractContextManager[object]:
                return exclusive_lock(lock_path, timeout)

            with contextlib.suppress(ChainIOError, LockTimeoutError):
                seal(self._path, segments, pending, signer, locked)

        group.after_release.append(carry_out)

    def pending_seal(self) -> "PendingSeal | None":
        """What to seal once the lock is let go (``seal_if_due`` outside a group), if anything."""
        from ledger.edges.files.sealing import seal_due

        if self.signer is None or self.segments is None or self._limits is None:
            return None
        head = self.head()
        if head is None:
            return None
        return seal_due(self._path, self.segments, self._limits, head)

    def _roll_back(self, fd: int, size: int) -> None:
        # Our own half-written line, under our own lock: cutting it keeps the
        # chain whole. If even that fails the tail stays torn and every writer
        # and verdict after us sees it and refuses.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
            os.fsync(fd)


class ChainFile(ChainLines):
    """The chain as a local file plus its lock file."""

    def __init__(
        self,
        path: Path,
        lock_timeout: float = 10.0,
        *,
        follow_symlinks: bool = False,
        segments: SegmentDir | None = None,
        limits: SegmentLimits | None = None,
    ) -> None:
        """A chain at ``path``.

        Args:
            path: the chain file (the open segment when ``segments`` is given).
            lock_timeout: seconds to wait for ``<path>.lock``.
            follow_symlinks: read through a symbolic link at ``path`` (an
                auditor's ``verify-chain LOG``); a home's chain refuses one.
            segments: where the chain's sealed segments are (a home's chain).
            limits: when writers seal the open segment (``None``: never).
        """
        super().__init__(path, follow_symlinks=follow_symlinks, segments=segments)
        self.limits = limits
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
            yield self._transaction(group)
            return
        with exclusive_lock(self.lock_path, self.lock_timeout):
            if self.segments is not None:
                finish_interrupted_seal(self.path, self.segments)
            tx = self._transaction(None)
            yield tx
            pending = None
            with contextlib.suppress(ChainIOError):
                pending = tx.pending_seal()
        if tx.signer is not None and pending is not None and self.segments is not None:
            self._seal(self.segments, pending, tx.signer)

    def _seal(self, segments: SegmentDir, pending: "PendingSeal", signer: "Signer") -> None:
        """Compress the sealed bytes without the lock, commit them under it a moment."""
        from ledger.edges.files.sealing import seal

        def locked() -> contextlib.AbstractContextManager[object]:
            return exclusive_lock(self.lock_path, self.lock_timeout)

        with contextlib.suppress(ChainIOError, LockTimeoutError):
            seal(self.path, segments, pending, signer, locked)

    def _transaction(self, group: GroupCommit | None) -> ChainTransaction:
        return ChainTransaction(
            self.path,
            follow_symlinks=self.follow_symlinks,
            group=group,
            segments=self.segments,
            limits=self.limits,
            lock=(self.lock_path, self.lock_timeout),
        )

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
            yield self._transaction(group)
            return
        with shared_lock(self.lock_path, self.lock_timeout):
            yield ChainTransaction(
                self.path, follow_symlinks=self.follow_symlinks, segments=self.segments
            )

    def head(self) -> ChainHead | None:
        """The last entry without taking the lock (a read-only view)."""
        return chain_head(self.path, self.segments, follow_symlinks=self.follow_symlinks)

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
        """The hash of entry ``number`` (counting from 1), or ``None`` if absent.

        Sealed segments before it are passed over by their checkpoints' counts
        (when they hold no markers), so an archived segment is never read.
        """
        seen, start = 0, 0
        for segment in self.segments.listing() if self.segments is not None else ():
            if segment.lines != segment.entries or segment.checkpoint.entries > number:
                break
            if segment.checkpoint.entries == number:
                return segment.checkpoint.head_hash
            seen, start = segment.checkpoint.entries, segment.end
        for raw in self.iter_lines(start):
            if allow_markers and raw.startswith(b"["):
                continue
            seen += 1
            if seen == number:
                try:
                    return parse_line(raw.rstrip(b"\n")).entry_hash
                except EnvelopeFormatError:
                    return None
        return None
