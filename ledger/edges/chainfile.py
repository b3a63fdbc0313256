"""``events.jsonl`` on a local disk: locking, appending, reading, parallel verify.

Appends happen under an exclusive ``flock`` on ``events.jsonl.lock`` held across
read-tail, hash, sign, append and fsync (SPEC §2). Reading the tail costs the
same at any chain length: the last line is found by reading backwards from the
end. A torn last line is reported, never repaired here: ``ledger recover`` owns
repairs.
"""

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ledger.core.envelope import GENESIS, EnvelopeFormatError, parse_line
from ledger.edges.files import fsync_dir
from ledger.edges.locks import exclusive_lock, shared_lock
from ledger.errors import ChainIOError, TornTailError

if TYPE_CHECKING:
    from ledger.core.chain import ChainReport
    from ledger.core.trust import TrustStore

_TAIL_READ = 8192
# Below this size one process verifies faster than starting a pool.
_PARALLEL_MIN_BYTES = 4 << 20


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

    def __init__(self, path: Path) -> None:
        self._path = path
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
            self._head = read_head(self._path)
            self._head_read = True
        return self._head

    def append(self, line: bytes, *, entry_hash: str | None = None, ts_utc: str | None = None,
               event_type: str | None = None) -> None:  # fmt: skip
        """Write one complete line and fsync it; on failure leave the file as it was.

        A writer that sealed the line passes its hash, time and type so the new
        head need not be parsed back.

        Raises:
            ChainIOError: the write or fsync failed (the partial line is removed).
        """
        head = self.head()
        start = head.size if head else 0
        created = not self._path.exists()
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise ChainIOError(f"cannot open {self._path}: {exc.strerror}") from exc
        try:
            written = 0
            try:
                while written < len(line):
                    written += os.write(fd, line[written:])
                os.fsync(fd)
            except OSError as exc:
                self._roll_back(fd, start)
                raise ChainIOError(f"cannot append to {self._path}: {exc.strerror}") from exc
        finally:
            os.close(fd)
        if created:
            fsync_dir(self._path.parent)
        if entry_hash is None or ts_utc is None or event_type is None:
            parsed = parse_line(line[:-1])
            entry_hash, ts_utc, event_type = parsed.entry_hash, parsed.ts_utc, parsed.event_type
        self._head = ChainHead(entry_hash, ts_utc, start + len(line), event_type)

    def _roll_back(self, fd: int, size: int) -> None:
        # Our own half-written line, under our own lock: cutting it keeps the
        # chain whole. If even that fails the tail stays torn and every writer
        # and verdict after us sees it and refuses.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
            os.fsync(fd)


def read_head(path: Path) -> ChainHead | None:
    """The chain's last entry, read backwards from the end.

    Raises:
        TornTailError: the last line has no newline.
        CorruptTailError: the last line is not a valid entry.
        ChainIOError: the file cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return None
        line, _start = read_last_line(fd, size)
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
    return ChainHead(parsed.entry_hash, parsed.ts_utc, size, parsed.event_type)


class ChainFile:
    """The chain as a local file plus its lock file."""

    def __init__(self, path: Path, lock_timeout: float = 10.0) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self.lock_timeout = lock_timeout

    @contextlib.contextmanager
    def transaction(self) -> Iterator[ChainTransaction]:
        """Hold the chain lock for one read-decide-append step.

        Raises:
            LockTimeoutError: the lock was not free within ``lock_timeout``.
            ChainIOError: the lock file cannot be opened.
        """
        with exclusive_lock(self.lock_path, self.lock_timeout):
            yield ChainTransaction(self.path)

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[ChainTransaction]:
        """A consistent read-only view: waits for a writer, creates no file.

        Raises:
            LockTimeoutError: a writer held the lock longer than ``lock_timeout``.
        """
        with shared_lock(self.lock_path, self.lock_timeout):
            yield ChainTransaction(self.path)

    def head(self) -> ChainHead | None:
        """The last entry without taking the lock (a read-only view)."""
        return read_head(self.path)

    def exists(self) -> bool:
        """Whether the chain file exists."""
        return self.path.exists()

    def iter_lines(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Raw lines (each with its ``\\n`` unless torn) from byte ``start`` to ``end``.

        Raises:
            ChainIOError: the file cannot be read.
        """
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.path}: {exc.strerror}") from exc
        with handle:
            handle.seek(start)
            remaining = None if end is None else end - start
            while remaining is None or remaining > 0:
                line = handle.readline() if remaining is None else handle.readline(remaining)
                if not line:
                    return
                if remaining is not None:
                    remaining -= len(line)
                yield line

    def verify(
        self,
        trust: "TrustStore",
        *,
        strict: bool = False,
        allow_markers: bool = False,
        workers: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> "ChainReport":
        """Verify the whole file, in parallel byte ranges when it is large.

        Raises:
            ChainIOError: the file cannot be read.
        """
        from ledger.core.chain import stitch

        try:
            size = self.path.stat().st_size
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.path}: {exc.strerror}") from exc
        workers = workers or os.cpu_count() or 1
        if size < _PARALLEL_MIN_BYTES or workers == 1:
            return self.verify_range(trust, strict, allow_markers, 0, None, from_genesis=True)
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        bounds = self._split(size, workers * 32)
        jobs = [
            (str(self.path), trust, strict, allow_markers, start, end, index == 0)
            for index, (start, end) in enumerate(bounds)
        ]
        reports: list[ChainReport] = []
        # fork: workers inherit the imported modules instead of re-importing them.
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            for (_start, end), report in zip(bounds, pool.map(_verify_job, jobs), strict=True):
                reports.append(report)
                if progress is not None:
                    progress(end, size)
        return stitch(reports)

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
        from ledger.core.chain import ChainVerifier

        verifier = ChainVerifier(
            trust,
            strict=strict,
            allow_markers=allow_markers,
            expected_prev=GENESIS if from_genesis else None,
        )
        for raw in self.iter_lines(start, end):
            if not verifier.feed(raw):
                break
        return verifier.report()

    def _split(self, size: int, parts: int) -> list[tuple[int, int]]:
        """Byte ranges that start and end on line boundaries."""
        cuts = [0]
        with self.path.open("rb") as handle:
            for index in range(1, parts):
                handle.seek(size * index // parts)
                handle.readline()
                position = handle.tell()
                if cuts[-1] < position < size:
                    cuts.append(position)
        cuts.append(size)
        return [(cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]

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


def _verify_job(job: tuple[str, "TrustStore", bool, bool, int, int, bool]) -> "ChainReport":
    path, trust, strict, allow_markers, start, end, from_genesis = job
    return ChainFile(Path(path)).verify_range(
        trust, strict, allow_markers, start, end, from_genesis=from_genesis
    )
