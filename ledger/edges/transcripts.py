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

from ledger.edges.files import atomic_write, open_regular, read_regular
from ledger.edges.locks import exclusive_lock
from ledger.errors import InputDataError

_CHUNK = 1 << 20


class TranscriptFile:
    """An open transcript; ``size`` is its length when it was opened."""

    def __init__(self, path: str) -> None:
        """Open ``path`` for reading without ever blocking.

        Raises:
            InputDataError: missing, not a regular file, or unreadable.
        """
        self.path = path
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

    def lines(self, offset: int) -> Iterator[tuple[int, bytes]]:
        """Each complete line from ``offset`` up to ``size``: (its start, its bytes).

        The bytes keep their ``\\n``. A last line without one (still being
        written) is not returned, so a later read finds it whole.

        Raises:
            InputDataError: a read failed.
        """
        position = offset
        pending = b""
        while position < self.size:
            chunk = self.read_at(position, min(_CHUNK, self.size - position))
            if not chunk:
                break
            position += len(chunk)
            data = pending + chunk
            start = position - len(data)
            begin = 0
            while (end := data.find(b"\n", begin)) != -1:
                yield start + begin, data[begin : end + 1]
                begin = end + 1
            pending = data[begin:]


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
