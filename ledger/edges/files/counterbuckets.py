"""Budgets' counters on disk: records in bucket files beside ``derived.json``, checked whole.

A budget with ``per`` keeps one counter for each value it has seen (sessions,
agents, keys: an agent picks them freely), so its counters live here, not in
``derived.json``: a verdict reads the bucket of each counter it touches and a
save appends a record for each counter it changed. Nothing here grows the
work of a verdict with the number of values.

Records go to 256 buckets (``state/counters/<2 hex>.<generation>.log``, by the
first byte of the SHA-256 of the value alone), one line each:
``{"b": name, "e": epoch, "v": value, "c": counter}``. The newest record of a
counter is the one that counts; ``c`` is ``null`` for a counter removed. A
budget's epoch grows when its counters start afresh (a new period): older
epochs' records count for nothing.

``derived.json`` (itself MAC'd) records each bucket's generation, size and
SHA-256 digest when it was saved, so a bucket read is checked whole: bytes past
the recorded size are ignored (appends of a save that never finished), a bucket
shorter than it lost records (a power loss; the state is rebuilt from the
chain), and one whose digest differs was edited (its counters are not trusted,
the gate halts until ``rebuild-state``). Checking each record alone would not
do: a newest record made unrecognisable would leave an older one to count. A
bucket is never appended to past bytes it does not account for: it is rewritten
as its next generation instead. A bucket is also rewritten (its newest live
records only) once it has grown by half since it was last written whole; the
old generation is removed after the state naming the new one is saved.
"""

import contextlib
import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from ledger.edges.fileio import open_regular
from ledger.errors import ChainIOError

BUCKETS = 256
# Each bucket's generation, size, size when last written whole and digest in
# the state file: one string of fixed-width hex slots, so loading and saving it
# costs the same however many buckets are in use (a verdict uses one or two).
_WIDTHS = (6, 9, 9, 32)
SLOT = sum(_WIDTHS)
_EMPTY_SLOT = "0" * SLOT
Record = dict[str, Any]
# A bucket is written whole again once it is this long and half as long again as then.
COMPACT_FLOOR = 32 * 1024
# Buckets whose bytes are kept once read: a verdict reads one or two.
_READS_KEPT = 8


class CountersLostError(ChainIOError):
    """A bucket is shorter than the state says, or cannot be read: rebuilt from the chain."""


def bucket_of(value: str) -> str:
    """The bucket the records of every counter of ``value`` go in, whatever its budget."""
    return hashlib.sha256(value.encode()).hexdigest()[:2]


# One encoder for every record: ``json.dumps`` with options builds a new one per call.
_COUNTER_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=4096)
def record_prefix(name: str, epoch: int, value: str) -> bytes:
    """How every record of one counter begins (a verdict asks for the same few again and again)."""
    return f'{{"b":{json.dumps(name)},"e":{epoch},"v":{json.dumps(value)},"c":'.encode()


def _line(name: str, epoch: int, value: str, counter: Any) -> bytes:
    counter_text = _COUNTER_ENCODER.encode(counter)
    return record_prefix(name, epoch, value) + counter_text.encode() + b"}\n"


def _digest(hashed: "hashlib._Hash") -> str:
    return hashed.hexdigest()[:32]


class _Entry(NamedTuple):
    generation: int
    size: int
    whole: int  # the size when the bucket was last written whole
    digest: str


class CounterBuckets:
    """The counter buckets as one saved state knows them (their generations, sizes, digests).

    Damage found while reading is noted in ``damage`` (its description, and
    whether records were lost rather than edited), never raised: the fold that
    asked goes on, and its caller decides before trusting or saving anything.
    """

    def __init__(self, directory: Path, table: str = "") -> None:
        self.directory = directory
        self._table = table  # as the state file holds it ("" when no bucket was written)
        self._changed: dict[str, _Entry] = {}
        # The running digest of each bucket read or written, to extend on append.
        self._hashed: dict[str, hashlib._Hash] = {}
        # Each bucket's bytes as read and checked, until it is written: the
        # budgets kept per one value all look in one bucket.
        self._read: dict[str, bytes] = {}
        self.damage: tuple[str, bool] | None = None
        # Generations replaced by the last save, removed once a state naming
        # their successors is on disk.
        self.obsolete: list[Path] = []

    def entry(self, bucket: str) -> _Entry:
        """A bucket's generation, sizes and digest as the state records them (zeros: none yet).

        Checked here, when the bucket is used, not when the state is loaded:
        a load costs the same however many buckets there are.

        Raises:
            CountersLostError: the state's record of the bucket is malformed.
        """
        if bucket in self._changed:
            return self._changed[bucket]
        try:
            at = int(bucket, 16) * SLOT
            if len(bucket) != len("00") or not self._table:
                raise ValueError(bucket)
            slot = self._table[at : at + SLOT]
            generation, size, whole = (
                int(slot[0:6], 16),
                int(slot[6:15], 16),
                int(slot[15:24], 16),
            )
            return _Entry(generation, size, whole, slot[24:])
        except ValueError:
            if not self._table and len(bucket) == len("00"):
                return _Entry(0, 0, 0, "")
            raise CountersLostError(f"counter bucket {bucket} is not recorded well") from None

    def in_use(self) -> list[str]:
        """The buckets that hold records (one recorded badly is noted as lost)."""
        found = []
        for bucket in (f"{n:02x}" for n in range(BUCKETS)):
            try:
                if self.entry(bucket).size:
                    found.append(bucket)
            except CountersLostError as exc:
                self._note(str(exc), lost=True)
        return found

    def table(self) -> str:
        """Every bucket's generation, sizes and digest, as the state file records them."""
        if self._changed:
            table = self._table or _EMPTY_SLOT * BUCKETS
            # A save changes a bucket or two: those slots are replaced in place.
            for bucket, entry in self._changed.items():
                at = int(bucket, 16) * SLOT
                slot = f"{entry.generation:06x}{entry.size:09x}{entry.whole:09x}{entry.digest:>32}"
                table = table[:at] + slot + table[at + SLOT :]
            self._table = table
            self._changed = {}
        return self._table

    def path(self, bucket: str, generation: int) -> Path:
        """The file of one generation of a bucket."""
        return self.directory / f"{bucket}.{generation}.log"

    def _note(self, problem: str, *, lost: bool) -> None:
        if self.damage is None or (lost and not self.damage[1]):
            self.damage = (problem, lost)

    def read(self, bucket: str) -> bytes | None:
        """The bucket's bytes the state accounts for, checked; ``None`` when damaged (noted)."""
        if bucket in self._read:
            return self._read[bucket]
        raw = self._read_checked(bucket)
        if raw is not None:
            if len(self._read) >= _READS_KEPT:
                self._read.clear()  # a long-lived gate reads many buckets over time
            self._read[bucket] = raw
        return raw

    def _read_checked(self, bucket: str) -> bytes | None:
        try:
            entry = self.entry(bucket)
        except CountersLostError as exc:
            self._note(str(exc), lost=True)
            return None
        if entry.size == 0:
            self._hashed[bucket] = hashlib.sha256()
            return b""
        try:
            fd = open_regular(self.path(bucket, entry.generation))
        except OSError as exc:
            self._note(f"counter bucket {bucket} unreadable: {exc.strerror}", lost=True)
            return None
        try:
            chunks, left = [], entry.size
            while left and (chunk := os.pread(fd, left, entry.size - left)):
                chunks.append(chunk)
                left -= len(chunk)
        except OSError as exc:
            self._note(f"counter bucket {bucket} unreadable: {exc.strerror}", lost=True)
            return None
        finally:
            os.close(fd)
        if left:
            self._note(f"counter bucket {bucket} lost records", lost=True)
            return None
        raw = b"".join(chunks)
        hashed = hashlib.sha256(raw)
        if _digest(hashed) != entry.digest:
            self._note(f"counter bucket {bucket} does not match its digest (edited?)", lost=False)
            return None
        self._hashed[bucket] = hashed
        return raw

    def find(self, name: str, epoch: int, value: str) -> Any:
        """The newest counter of ``value`` in epoch ``epoch`` of budget ``name``, or ``None``."""
        raw = self.read(bucket_of(value))
        if not raw:
            return None
        needle = record_prefix(name, epoch, value)
        at = len(raw)
        while (at := raw.rfind(needle, 0, at)) >= 0:
            if at == 0 or raw[at - 1] == ord("\n"):
                record = _parsed(raw[at : raw.find(b"\n", at)])
                return None if record is None else record["c"]
        return None

    def scan(self, name: str, epoch: int) -> dict[str, Any]:
        """Every counter of budget ``name`` in epoch ``epoch`` (``None``: removed)."""
        prefix = record_prefix(name, epoch, "")[: -len(b'"","c":')]
        newest: dict[str, Any] = {}
        for bucket in self.in_use():
            for line in (self.read(bucket) or b"").splitlines():
                record = _parsed(line) if line.startswith(prefix) else None
                if record is not None:
                    newest[record["v"]] = record["c"]
        return newest

    def save(
        self, changes: Iterable[tuple[str, int, str, Any]], live: Callable[[Record], bool]
    ) -> None:
        """Write changed counters ``(name, epoch, value, counter)``, each bucket appended to once.

        ``live`` tells a record worth keeping when a bucket is written whole.

        Raises:
            CountersLostError: a bucket lost records or was edited (the state is dropped).
            ChainIOError: a bucket cannot be written.
        """
        by_bucket: dict[str, list[bytes]] = {}
        for name, epoch, value, counter in changes:
            by_bucket.setdefault(bucket_of(value), []).append(_line(name, epoch, value, counter))
        for bucket, lines in sorted(by_bucket.items()):
            self._save_bucket(bucket, b"".join(lines), live)

    def _save_bucket(self, bucket: str, data: bytes, live: Callable[[Record], bool]) -> None:
        entry = self.entry(bucket)
        try:
            actual = self.path(bucket, entry.generation).stat().st_size
        except FileNotFoundError:
            actual = 0
        except OSError as exc:
            raise ChainIOError(f"cannot write counter bucket {bucket}: {exc.strerror}") from exc
        if actual < entry.size:
            raise CountersLostError(f"counter bucket {bucket} lost records")
        grown = entry.size + len(data) > max(COMPACT_FLOOR, entry.whole + entry.whole // 2)
        if actual > entry.size or grown:
            self._rewrite(bucket, data, live)
            return
        hashed = self._hashed.get(bucket)
        if hashed is None:
            if self.read(bucket) is None:
                raise CountersLostError(self.damage[0] if self.damage else bucket)
            hashed = self._hashed[bucket]
        self._write(bucket, entry.generation, data)
        hashed.update(data)
        self._changed[bucket] = _Entry(
            entry.generation, entry.size + len(data), entry.whole, _digest(hashed)
        )

    def _write(self, bucket: str, generation: int, data: bytes) -> None:
        """Append ``data`` to a generation of a bucket."""
        self._read.pop(bucket, None)
        path = self.path(bucket, generation)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            try:
                fd = open_regular(path, flags)
            except FileNotFoundError:  # the first bucket of a home: its folder too
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = open_regular(path, flags)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        except OSError as exc:
            raise ChainIOError(f"cannot write counter bucket {bucket}: {exc.strerror}") from exc

    def _write_whole(self, bucket: str, generation: int, data: bytes) -> None:
        fresh = self.path(bucket, generation)
        with contextlib.suppress(FileNotFoundError):
            fresh.unlink()  # left by a save that never finished
        self._write(bucket, generation, data)
        hashed = hashlib.sha256(data)
        self._hashed[bucket] = hashed
        self._changed[bucket] = _Entry(generation, len(data), len(data), _digest(hashed))

    def _rewrite(self, bucket: str, data: bytes, live: Callable[[Record], bool]) -> None:
        """Write a bucket whole as its next generation: its newest live records, then ``data``."""
        raw = self.read(bucket)
        if raw is None:
            raise CountersLostError(self.damage[0] if self.damage else bucket)
        newest: dict[tuple[str, int, str], bytes] = {}
        for line in raw.splitlines(keepends=True):
            record = _parsed(line)
            if record is None:
                raise CountersLostError(f"counter bucket {bucket} is malformed")
            key = (record["b"], record["e"], record["v"])
            newest.pop(key, None)  # the newest record goes last
            if record["c"] is not None and live(record):
                newest[key] = line
        generation = self.entry(bucket).generation
        self._write_whole(bucket, generation + 1, b"".join(newest.values()) + data)
        self.obsolete.append(self.path(bucket, generation))

    def replace(self, changes: Iterable[tuple[str, int, str, Any]]) -> None:
        """Make the buckets exactly these counters (a state folded afresh), in new generations.

        Raises:
            ChainIOError: a bucket cannot be written.
        """
        try:
            existing = list(self.directory.iterdir())
        except FileNotFoundError:
            existing = []
        except OSError as exc:
            raise ChainIOError(f"cannot list {self.directory}: {exc.strerror}") from exc
        generation = 1 + max((_generation(path) for path in existing), default=0)
        by_bucket: dict[str, list[bytes]] = {}
        for name, epoch, value, counter in changes:
            if counter is not None:
                by_bucket.setdefault(bucket_of(value), []).append(
                    _line(name, epoch, value, counter)
                )
        self._table, self._changed, self._hashed, self._read = "", {}, {}, {}
        for bucket, lines in sorted(by_bucket.items()):
            self._write_whole(bucket, generation, b"".join(lines))
        self.obsolete = existing

    def remove_obsolete(self) -> None:
        """Remove generations no saved state names any more."""
        for path in self.obsolete:
            with contextlib.suppress(OSError):
                path.unlink()
        self.obsolete = []


def _parsed(line: bytes) -> Record | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) and "c" in record else None


def _generation(path: Path) -> int:
    parts = path.name.split(".")
    try:
        return int(parts[1]) if len(parts) == len(("bucket", "generation", "log")) else 0
    except ValueError:
        return 0
