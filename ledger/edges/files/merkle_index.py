"""The Merkle node index of the file store: ``state/merkle/`` in the home (SPEC §10).

One file per level, ``level-NN.bin``, 32 bytes per node, so node ``(level, i)``
is at offset ``32 * i`` of level ``level``'s file; only complete subtrees are
stored, so level ``l`` of ``n`` leaves holds ``n >> l`` nodes. ``entries.bin``
holds the leaves' data (each entry's 32-byte hash) the same way, so an entry's
hash is found by its number, and its number by a scan for its hash. ``mark.json``
says how many leaves the index holds and where in the chain the last of them
ends, so catching up reads only the entries after it.

Appends write the level files first and the mark last (atomically): a crash
between leaves bytes beyond the mark, which the next append cuts off. Level
files are not fsynced: the index is derived state, and a file found shorter
than its mark needs makes the mark count as absent, so the index is rebuilt
from the chain.
"""

import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from ledger.core.merkle import HASH_SIZE, IndexMark, leaf_hash, node_hash
from ledger.edges.fileio import atomic_write
from ledger.errors import ChainIOError

_MARK = "mark.json"
_ENTRIES = "entries.bin"
_ENTRIES_LEVEL = -1
_SCAN_CHUNK = HASH_SIZE * 32768


class FileNodeIndex:
    """Tree nodes by level in a folder; satisfies ``services.chain.merkle_sync.NodeIndex``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.reads = 0
        self._fds: dict[int, int] = {}

    def close(self) -> None:
        """Close the level files opened for reading."""
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _level_path(self, level: int) -> Path:
        if level == _ENTRIES_LEVEL:
            return self.directory / _ENTRIES
        return self.directory / f"level-{level:02d}.bin"

    def _fd(self, level: int) -> int:
        fd = self._fds.get(level)
        if fd is None:
            try:
                fd = os.open(self._level_path(level), os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                raise ChainIOError(f"cannot read the Merkle index: {exc.strerror}") from exc
            self._fds[level] = fd
        return fd

    def node(self, level: int, index: int) -> bytes:
        """Node ``(level, index)``: one 32-byte read.

        Raises:
            ChainIOError: the node is missing or cannot be read.
        """
        self.reads += 1
        try:
            data = os.pread(self._fd(level), HASH_SIZE, HASH_SIZE * index)
        except OSError as exc:
            raise ChainIOError(f"cannot read the Merkle index: {exc.strerror}") from exc
        if len(data) != HASH_SIZE:
            raise ChainIOError(f"the Merkle index has no node ({level}, {index})")
        return data

    def mark(self) -> IndexMark | None:
        """What the index holds, or ``None`` when absent, unreadable or short."""
        try:
            document = json.loads((self.directory / _MARK).read_bytes())
            mark = IndexMark(
                int(document["leaves"]),
                int(document["line_start"]),
                int(document["position"]),
                str(document["head_hash"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if mark.leaves < 0:
            return None
        level, count = _ENTRIES_LEVEL, mark.leaves
        while count > 0:
            try:
                if self._level_path(level).stat().st_size < count * HASH_SIZE:
                    return None
            except OSError:
                return None
            if level >= 0:
                count >>= 1
            level += 1
        return mark

    def reset(self) -> None:
        """Forget every node (the next catch-up rebuilds from the chain).

        Raises:
            ChainIOError: the files cannot be removed.
        """
        self.close()
        try:
            (self.directory / _MARK).unlink(missing_ok=True)
            for path in [*self.directory.glob("level-*.bin"), self.directory / _ENTRIES]:
                path.unlink(missing_ok=True)
        except OSError as exc:
            raise ChainIOError(f"cannot reset the Merkle index: {exc.strerror}") from exc

    def append(self, entries: Sequence[bytes], mark: IndexMark) -> None:
        """Add entries (raw entry hashes) after the ``mark.leaves - len(entries)`` held.

        Writes their leaf hashes and the parents they complete: O(len(entries))
        hashing and one write per level; then the mark.

        Raises:
            ChainIOError: a file cannot be written.
        """
        old = mark.leaves - len(entries)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ChainIOError(f"cannot write the Merkle index: {exc.strerror}") from exc
        self.close()
        self._write_level(_ENTRIES_LEVEL, old, list(entries))
        level, start, nodes = 0, old, [leaf_hash(e) for e in entries]
        while nodes:
            self._write_level(level, start, nodes)
            end = start + len(nodes)
            if start & 1:
                nodes.insert(0, self._read_stored(level, start - 1))
                start -= 1
            parents = [node_hash(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
            level, start, nodes = level + 1, start >> 1, parents
            if end >> 1 == start:
                break
        document = {
            "leaves": mark.leaves,
            "line_start": mark.line_start,
            "position": mark.position,
            "head_hash": mark.head_hash,
        }
        atomic_write(self.directory / _MARK, json.dumps(document).encode() + b"\n", durable=False)

    def _read_stored(self, level: int, index: int) -> bytes:
        try:
            fd = os.open(self._level_path(level), os.O_RDONLY | os.O_CLOEXEC)
            try:
                data = os.pread(fd, HASH_SIZE, HASH_SIZE * index)
            finally:
                os.close(fd)
        except OSError as exc:
            raise ChainIOError(f"cannot read the Merkle index: {exc.strerror}") from exc
        if len(data) != HASH_SIZE:
            raise ChainIOError(f"the Merkle index has no node ({level}, {index})")
        return data

    def _write_level(self, level: int, start: int, nodes: list[bytes]) -> None:
        path = self._level_path(level)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                os.ftruncate(fd, start * HASH_SIZE)
                os.pwrite(fd, b"".join(nodes), start * HASH_SIZE)
            finally:
                os.close(fd)
        except OSError as exc:
            raise ChainIOError(f"cannot write the Merkle index: {exc.strerror}") from exc

    def level_bytes(self, level: int, count: int) -> bytes:
        """The first ``count`` nodes of a level, as stored (for checking the index)."""
        try:
            return os.pread(self._fd(level), count * HASH_SIZE, 0)
        except (OSError, ChainIOError):
            return b""

    def entry(self, index: int) -> bytes:
        """The raw hash of entry ``index`` (from 0): one read.

        Raises:
            ChainIOError: the entry is missing or cannot be read.
        """
        return self.node(_ENTRIES_LEVEL, index)

    def find_entry(self, entry_hash: bytes, size: int) -> int | None:
        """The index of an entry hash among the first ``size`` (a linear scan)."""
        fd = self._fd(_ENTRIES_LEVEL)
        leaf = entry_hash
        offset, limit = 0, size * HASH_SIZE
        while offset < limit:
            try:
                block = os.pread(fd, min(_SCAN_CHUNK, limit - offset), offset)
            except OSError as exc:
                raise ChainIOError(f"cannot read the Merkle index: {exc.strerror}") from exc
            if not block:
                return None
            at = block.find(leaf)
            while at != -1:
                if at % HASH_SIZE == 0:
                    return (offset + at) // HASH_SIZE
                at = block.find(leaf, at + 1)
            offset += len(block)
        return None
