"""Claude Code transcripts read from a byte offset, and a cursor per transcript.

The cursor (``state/transcripts/<sha256 of the path>.json`` in the home)
remembers how far a transcript was read and a few figures about the calls
found in it. It is derived: losing it only means reading the transcript again
from the start, which records nothing twice (each call's record carries an
idempotency key), so it is written atomically but not fsync'd.
"""

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledger.edges.fileio import atomic_write, open_regular, read_regular
from ledger.edges.locks import exclusive_lock
from ledger.errors import InputDataError

_CHUNK = 1 << 20
# A transcript line longer than this is skipped (named on stderr), never held
# in memory: Claude Code's assistant lines are far shorter; tool results and
# pasted files are what grows.
MAX_LINE = 32 << 20


class TranscriptFile:
    """An open transcript; ``size`` is its length when it was opened."""

    def __init__(self, path: str, chunk: int = _CHUNK, max_line: int = MAX_LINE) -> None:
        """Open ``path`` for reading without ever blocking.

        Raises:
            InputDataError: missing, not a regular file, or unreadable.
        """
        self.path = path
        self.chunk = chunk
        self.max_line = max_line
        # After ``lines``: (start, end read, too long) of a last line without ``\n``.
        self.partial: tuple[int, int, bool] | None = None
        try:
            self._fd = open_regular(Path(path))
        except FileNotFoundError as exc:
            raise InputDataError(f"transcript {path}: no such file") from exc
        except OSError as exc:
            raise InputDataError(f"transcript {path}: {exc.strerror}") from exc
        try:
            self.size = os.fstat(self._fd).st_size
        except OSError as exc:
            os.close(self._fd)
            raise InputDataError(f"transcript {path}: {exc.strerror}") from exc

    def close(self) -> None:
        """Release the file."""
        os.close(self._fd)

    def read_at(self, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the end of the file).

        Raises:
            InputDataError: the read failed.
        """
        try:
            return os.pread(self._fd, length, start)
        except OSError as exc:
            raise InputDataError(f"transcript {self.path}: {exc.strerror}") from exc

    def lines(
        self, offset: int, oversized_from: int | None = None
    ) -> Iterator[tuple[int, int, bytes | None]]:
        """Each complete line from ``offset`` up to ``size``: (its start, its end, its bytes).

        The bytes keep their ``\\n``. A line longer than ``max_line`` bytes is
        not held: its bytes come as ``None``. Every byte is read
        once and looked at once, so reading is linear in the bytes read however
        long the lines are, and at most ``max_line`` bytes of a line are held.
        A last line without ``\\n`` (still being written) is not returned, so a
        later read finds it whole; ``partial`` then says where it starts, how
        far it was read and whether it is already too long, so that a later
        read of a too-long line goes on from there instead of reading it again
        (``oversized_from``: the line at ``offset`` is too long and has no
        ``\\n`` before that position).

        Raises:
            InputDataError: a read failed.
        """
        position = offset
        line_start = offset
        parts: list[bytes] = []
        held = 0
        oversized = False
        if oversized_from is not None and offset < oversized_from <= self.size:
            position, oversized = oversized_from, True
        while position < self.size:
            chunk = self.read_at(position, min(self.chunk, self.size - position))
            if not chunk:
                break
            begin = 0
            while (end := chunk.find(b"\n", begin)) != -1:
                line_end = position + end + 1
                if oversized:
                    yield line_start, line_end, None
                else:
                    parts.append(chunk[begin : end + 1])
                    yield line_start, line_end, b"".join(parts)
                parts, held, oversized = [], 0, False
                begin = end + 1
                line_start = position + begin
            rest = len(chunk) - begin
            if rest and not oversized:
                held += rest
                if held > self.max_line:
                    parts, oversized = [], True  # drop it: only its end is looked for
                else:
                    parts.append(chunk[begin:])
            position += len(chunk)
        self.partial = (line_start, position, oversized) if position > line_start else None


class TranscriptFiles:
    """Transcripts and their cursors, kept in ``directory`` (derived state)."""

    def __init__(self, directory: Path, lock_timeout: float) -> None:
        self.directory = directory
        self.lock_timeout = lock_timeout

    def _base(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()
        return self.directory / digest

    @contextlib.contextmanager
    def open(self, path: str) -> Iterator[TranscriptFile]:
        """The transcript at ``path``, open for the block.

        Raises:
            InputDataError: missing, not a regular file, or unreadable.
        """
        transcript = TranscriptFile(path)
        try:
            yield transcript
        finally:
            transcript.close()

    def subagents(self, path: str) -> list[str]:
        """The ``*.jsonl`` files in ``<session>/subagents/`` beside the transcript ``path``.

        ``<session>`` is the transcript's name without ``.jsonl``; no folder:
        a session without subagents.

        Raises:
            InputDataError: the folder exists but cannot be listed.
        """
        folder = Path(path.removesuffix(".jsonl")) / "subagents"
        try:
            names = sorted(entry.name for entry in os.scandir(folder) if entry.is_file())
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise InputDataError(f"subagent transcripts {folder}: {exc.strerror}") from exc
        return [str(folder / name) for name in names if name.endswith(".jsonl")]

    def load_cursor(self, key: str) -> dict[str, Any] | None:
        """The cursor stored for ``key``, or ``None`` when there is none or it is unreadable."""
        try:
            document = json.loads(read_regular(self._base(key).with_suffix(".json")))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            return None
        return document if isinstance(document, dict) else None

    def save_cursor(self, key: str, cursor: dict[str, Any]) -> None:
        """Replace the cursor of ``key`` (atomically; not fsync'd: it is derived).

        Raises:
            ChainIOError: the file cannot be written.
        """
        data = json.dumps(cursor, sort_keys=True, separators=(",", ":")).encode()
        atomic_write(self._base(key).with_suffix(".json"), data, 0o600, durable=False)

    def locked(self, key: str) -> contextlib.AbstractContextManager[None]:
        """One reader or writer of ``key``'s cursor at a time.

        Raises:
            LockTimeoutError: the lock stayed busy longer than ``lock_timeout``.
            ChainIOError: the lock file cannot be opened.
        """
        return exclusive_lock(self._base(key).with_suffix(".lock"), self.lock_timeout)
