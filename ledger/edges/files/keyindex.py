"""The key index: idempotency keys and served request ids, derived state beside ``derived.json``.

One record per key, so a repeat is found without reading the chain. Records
live in at most 256 append-only bucket files (``state/index/<2 hex>.log``, by
the first byte of the key's SHA-256), one MAC'd line each: a lookup reads one
bucket, a save appends to the buckets its records fall in, and nothing is
fsync'd -- the chain is the durable copy, and no file is made per call.

The state file records how long each bucket was when it was saved. A bucket
found shorter than that (a power loss kept the state but not the appends) is
damage: lookups in it search the chain instead (``IndexDamagedError``), and the
next save drops the state, so it is rebuilt, index and all, from the verified
chain. A bucket longer than recorded holds records of entries the state has
not folded yet; lookups hold each record against the chain they see.
"""

import contextlib
import hashlib
import hmac
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ledger.edges.fileio import open_regular
from ledger.errors import ChainIOError, StateMismatchError

Sizes = dict[str, int]


class IndexDamagedError(StateMismatchError):
    """A bucket is shorter than the state says: it lost records."""


def bucket_of(key: str) -> str:
    """The bucket a key's record goes in."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:2]


def encode(record: dict[str, Any], mac_key: bytes) -> bytes:
    """One index line: the record's JSON, a space, its MAC."""
    body = json.dumps(record, sort_keys=True, separators=(",", ":")).encode("utf-8")
    mac = hmac.new(mac_key, body, hashlib.sha256).hexdigest().encode("ascii")
    return body + b" " + mac + b"\n"


def find_in(raw: bytes, key: str, mac_key: bytes) -> dict[str, Any] | None:
    """The first record of ``key`` among index lines (edited or torn lines are skipped)."""
    needle = b'"key":' + json.dumps(key).encode("utf-8")
    start = 0
    while (at := raw.find(needle, start)) >= 0:
        line_start = raw.rfind(b"\n", 0, at) + 1
        line_end = raw.find(b"\n", at)
        if line_end < 0:
            return None  # a torn last line
        start = line_end
        body, _, mac = raw[line_start:line_end].rpartition(b" ")
        expected = hmac.new(mac_key, body, hashlib.sha256).hexdigest().encode("ascii")
        if not hmac.compare_digest(expected, mac):
            continue
        try:
            record = json.loads(body)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("key") == key:
            return record
    return None


class KeyIndex:
    """The bucket files of one home's key index."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, bucket: str) -> Path:
        """The file of one bucket."""
        return self.directory / f"{bucket}.log"

    def read(self, bucket: str, recorded: int) -> bytes:
        """A bucket's lines.

        Raises:
            IndexDamagedError: the bucket is shorter than ``recorded`` or unreadable.
        """
        try:
            fd = open_regular(self.path(bucket))
        except FileNotFoundError:
            if recorded > 0:
                raise IndexDamagedError(f"key index bucket {bucket} is missing") from None
            return b""
        except OSError as exc:
            raise IndexDamagedError(f"key index bucket {bucket}: {exc.strerror}") from exc
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(fd)
        raw = b"".join(chunks)
        if len(raw) < recorded:
            raise IndexDamagedError(f"key index bucket {bucket} lost records")
        return raw

    def append(self, bucket: str, lines: bytes, recorded: int) -> int:
        """Append ``lines`` to a bucket that must hold at least ``recorded`` bytes; its new size.

        Each append starts on a line of its own, so a torn line left by a crash
        never swallows the first new record.

        Raises:
            IndexDamagedError: the bucket is shorter than ``recorded``.
            ChainIOError: the bucket cannot be written.
        """
        path = self.path(bucket)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        except OSError as exc:
            raise ChainIOError(f"cannot write the key index: {exc.strerror}") from exc
        try:
            size = os.fstat(fd).st_size
            if size < recorded:
                raise IndexDamagedError(f"key index bucket {bucket} lost records")
            data = memoryview(b"\n" + lines)
            while data:
                data = data[os.write(fd, data) :]
            return size + 1 + len(lines)
        except OSError as exc:
            raise ChainIOError(f"cannot write the key index: {exc.strerror}") from exc
        finally:
            os.close(fd)

    def replace(self, lines_by_bucket: dict[str, bytes]) -> Sizes:
        """Make the index exactly these buckets (a rebuild); their sizes.

        Raises:
            ChainIOError: the index cannot be written.
        """
        fresh = self.directory.with_name(f".{self.directory.name}.new-{os.getpid()}")
        try:
            shutil.rmtree(fresh, ignore_errors=True)
            fresh.mkdir(parents=True, mode=0o700)
            for bucket, lines in lines_by_bucket.items():
                fd = os.open(fresh / f"{bucket}.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                try:
                    data = memoryview(lines)
                    while data:
                        data = data[os.write(fd, data) :]
                finally:
                    os.close(fd)
            self.remove()
            fresh.replace(self.directory)
        except OSError as exc:
            shutil.rmtree(fresh, ignore_errors=True)
            raise ChainIOError(f"cannot write the key index: {exc.strerror}") from exc
        return {bucket: len(lines) for bucket, lines in lines_by_bucket.items()}

    def remove(self) -> None:
        """Remove the index (it is rebuilt from the chain with the state)."""
        # The per-key files of earlier versions go with it.
        for directory in (self.directory, self.directory.with_name("keys")):
            doomed = directory.with_name(f".{directory.name}.old-{os.getpid()}")
            with contextlib.suppress(FileNotFoundError):
                directory.replace(doomed)
                shutil.rmtree(doomed, ignore_errors=True)


def lines_by_bucket(records: Iterable[dict[str, Any]], mac_key: bytes) -> dict[str, bytes]:
    """Index lines grouped by bucket, in the records' order."""
    grouped: dict[str, list[bytes]] = {}
    for record in records:
        grouped.setdefault(bucket_of(record["key"]), []).append(encode(record, mac_key))
    return {bucket: b"".join(lines) for bucket, lines in grouped.items()}
