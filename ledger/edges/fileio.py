"""Whole-file writes that never leave a half-written file behind."""

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any, Generic, TypeVar

from ledger.errors import ChainIOError, InputDataError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def describe_mode(mode: int) -> str:
    """Words for what a non-regular ``st_mode`` is, fit for a message."""
    for test, name in _KINDS:
        if test(mode):
            return f"{name}, not a regular file"
    return "not a regular file"


FileIdentity = tuple[int, int, int, int, int]
V = TypeVar("V")


def identity_of_stat(info: os.stat_result) -> FileIdentity:
    """Device, inode, size, mtime and ctime of a ``stat`` result.

    Two equal identities mean the file's bytes cannot have changed between them:
    every write and every ``utime()`` sets the ctime, which cannot be set back.
    """
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


# A file unchanged for this long gets a new identity from its next change even
# where timestamps are coarse: a kernel before Linux 6.13 stamps ctime per clock
# tick (1-4 ms), ext4 with 128-byte inodes per second; within one tick a rename
# that reuses an inode number with the same size could look like the old file.
SETTLED_NS = 2_000_000_000


def settled(identity: FileIdentity) -> bool:
    """Whether what was read under ``identity`` may be remembered by it.

    True once the file has gone unchanged for ``SETTLED_NS``; a file changed
    more recently is read again next time, as a fresh process would.
    """
    now = time.time_ns()  # noqa: TID251 - set against the file system's own stamps
    return now - max(identity[3], identity[4]) > SETTLED_NS


class ByIdentity(Generic[V]):
    """What a process read from files, remembered by the identities of those files.

    Every verdict reads the trust store, the writer key, the state MAC key and
    the newest checkpoint; a long-lived process reads them again only when a
    file is another one. A value is kept only once every file behind it has
    settled (``settled``; ``None`` stands for a file that is not there), and
    at most ``kept`` values are held.
    """

    def __init__(self, kept: int = 64) -> None:
        self._kept = kept
        self._values: dict[tuple[FileIdentity | None, ...], V] = {}

    def get(self, *files: FileIdentity | None) -> V | None:
        """What was kept for exactly these files, or ``None``."""
        return self._values.get(files)

    def clear(self) -> None:
        """Forget every value: the next read of each goes to the files."""
        self._values.clear()

    def keep(self, value: V, *files: FileIdentity | None) -> None:
        """Remember ``value`` as read from ``files``, if all of them have settled."""
        if not all(found is None or settled(found) for found in files):
            return
        if len(self._values) >= self._kept:
            self._values.clear()
        self._values[files] = value


def file_identity(path: str | Path, *, follow_symlinks: bool = True) -> FileIdentity | None:
    """``identity_of_stat`` of the file at ``path``; ``None`` when it cannot be stat'ed."""
    try:
        return identity_of_stat(os.stat(path, follow_symlinks=follow_symlinks))  # noqa: PTH116 - str or Path
    except OSError:
        return None


def open_regular(path: Path, flags: int = os.O_RDONLY, *, follow_symlinks: bool = True) -> int:
    """Open ``path`` only if it is a regular file, without ever blocking.

    ``O_NONBLOCK`` keeps a FIFO from stalling the open (a reader would wait for
    a writer forever); the ``fstat`` after it refuses a FIFO, a directory or a
    device before anything is read or written. With ``follow_symlinks=False`` a
    symbolic link at ``path`` is refused too (``O_NOFOLLOW``), dangling or not.

    Raises:
        FileNotFoundError: nothing is at ``path`` (and ``O_CREAT`` was not given).
        OSError: anything else; ``strerror`` says what, in words fit for a message.
    """
    flags |= os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, 0o600)
    except FileNotFoundError:
        raise
    except OSError as exc:
        try:
            mode = path.stat(follow_symlinks=follow_symlinks).st_mode
        except OSError:
            raise exc from None
        if not stat.S_ISREG(mode):
            raise OSError(exc.errno, describe_mode(mode), str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OSError(errno.EINVAL, describe_mode(mode), str(path))
    return fd


def read_regular(path: Path, *, follow_symlinks: bool = True) -> bytes:
    """The whole of a regular file (see ``open_regular``).

    Raises:
        FileNotFoundError: nothing is at ``path``.
        OSError: not a regular file, or the read failed.
    """
    fd = open_regular(path, follow_symlinks=follow_symlinks)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a create or rename) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int = 0o644, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync the directory.

    Raises:
        ChainIOError: the write failed; ``path`` is unchanged.
    """
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        temp.replace(path)
        if durable:
            fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise ChainIOError(f"cannot write {path}: {exc.strerror}") from exc


def exclusive_create(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` only if it does not exist (``O_EXCL``), durably.

    Raises:
        FileExistsError: the file is already there (never overwritten).
        ChainIOError: any other failure.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        if path.parent.is_dir():
            raise
        raise ChainIOError(f"cannot create {path}: {path.parent} is not a directory") from None
    except OSError as exc:
        raise ChainIOError(f"cannot create {path}: {exc.strerror}") from exc
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(path.parent)
    except OSError as exc:
        # Ours, just created: a half-written file must not be taken for a whole one.
        with contextlib.suppress(OSError):
            path.unlink()
        raise ChainIOError(f"cannot write {path}: {exc.strerror}") from exc


def read_user_file(path: Path, what: str) -> bytes:
    """Read a file the user named; a failure is bad input data (exit 65).

    Raises:
        InputDataError: missing, unreadable, or not a regular file (never blocks
            on a FIFO).
    """
    try:
        return read_regular(path)
    except OSError as exc:
        raise InputDataError(f"cannot read {what} {path}: {exc.strerror}") from exc


def read_json_file(path: Path, what: str) -> Any:
    """Read and parse a JSON file the user named.

    Raises:
        InputDataError: missing, unreadable, or not JSON.
    """
    data = read_user_file(path, what)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise InputDataError(f"{what} {path} is not valid JSON: {exc}") from exc


def home_problem(home: Path, config_name: str) -> str | None:
    """Why ``home`` is not a ledger home this process can use, or ``None``.

    Looks only (creates nothing): the folder must exist, be a directory this
    process can list, and hold a readable ``config_name`` (what ``ledger init``
    writes first).
    """
    shown = home.absolute()
    try:
        info = home.stat()
    except FileNotFoundError:
        return f"no ledger home at {shown}: run `ledger init`"
    except OSError as exc:
        return f"ledger home {shown} cannot be read: {exc.strerror}"
    if not stat.S_ISDIR(info.st_mode):
        return f"ledger home {shown} is not a directory"
    if not os.access(home, os.R_OK | os.X_OK):
        return f"ledger home {shown} cannot be read: permission denied"
    config = home / config_name
    try:
        read_regular(config)
    except FileNotFoundError:
        return f"no ledger home at {shown} (no {config_name}): run `ledger init`"
    except OSError as exc:
        return f"ledger home {shown} cannot be read: {config_name}: {exc.strerror}"
    return None


def remove_tree(directory: Path) -> None:
    """Remove a folder of derived files: renamed aside first, so no reader sees it half gone."""
    doomed = directory.with_name(f".{directory.name}.old-{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        directory.replace(doomed)
        shutil.rmtree(doomed, ignore_errors=True)


def sha256_of_file(path: Path) -> str:
    """The SHA-256 of a file's bytes, read a MiB at a time.

    Raises:
        OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def copy_read_only(source: Path, target: Path, expect_sha256: str | None = None) -> None:
    """Copy ``source`` to a read-only ``target``, durably, never leaving half a copy.

    The bytes go to a temporary name of this process, are fsync'd and (when
    ``expect_sha256`` is given) checked, and only then renamed into place; the
    caller syncs the folder.

    Raises:
        OSError: a file cannot be read or written.
        ChainIOError: the copy does not hash as ``expect_sha256`` says.
    """
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with source.open("rb") as reader, temporary.open("wb") as writer:
            shutil.copyfileobj(reader, writer)
            writer.flush()
            os.fsync(writer.fileno())
        if expect_sha256 is not None and sha256_of_file(temporary) != expect_sha256:
            raise ChainIOError(f"{source} does not hash as its manifest says; not copied")
        temporary.chmod(0o444)
        temporary.replace(target)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
