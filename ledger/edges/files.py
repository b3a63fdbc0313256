"""Whole-file writes that never leave a half-written file behind."""

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from ledger.errors import ChainIOError, InputDataError


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
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
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
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise
    except OSError as exc:
        raise ChainIOError(f"cannot create {path}: {exc.strerror}") from exc
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def read_user_file(path: Path, what: str) -> bytes:
    """Read a file the user named; a failure is bad input data (exit 65).

    Raises:
        InputDataError: missing or unreadable.
    """
    try:
        return path.read_bytes()
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
