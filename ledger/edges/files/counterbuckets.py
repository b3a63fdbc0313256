"""Budgets' counters on disk: MAC'd records in bucket files beside ``derived.json``.

A budget with ``per`` keeps one counter for each value it has seen (sessions,
agents, keys: an agent picks them freely), so its counters live here, not in
``derived.json``: a verdict reads the bucket of each counter it touches and a
save appends a record for each counter it changed. Nothing here grows the
work of a verdict with the number of values.

Records go to 256 buckets (``state/counters/<2 hex>.<generation>.log``, by the
first byte of the SHA-256 of the budget's name and the value), one line each:
``{"b": name, "e": epoch, "v": value, "c": counter}``, a space, and an
HMAC-SHA256 under the state's key over the bucket, its generation, the line's
offset and the body. The newest record of a counter is the one that counts;
``c`` is ``null`` for a counter removed. A budget's epoch grows when its
counters start afresh (a new period): older epochs' records count for nothing.

``derived.json`` records each bucket's generation and size when it was saved.
Bytes past that size are ignored (appends of a save that never finished), a
bucket shorter than it lost records (a power loss; the state is rebuilt from the
chain), and a record whose MAC does not match was edited (the counter is not
trusted). The offset in the MAC keeps a record from being copied over another,
and a bucket is never appended to past bytes it does not account for: it is
rewritten as its next generation instead. A bucket is also rewritten (its
newest live records only) once it has doubled since it was last written
whole; the old generation is removed after the state naming the new one is
saved.
"""

import contextlib
import hashlib
import hmac
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ledger.edges.fileio import open_regular
from ledger.errors import ChainIOError

BUCKETS = 256
# Each bucket's [generation, size, size when last written whole] in the state
# file: one string of fixed-width hex slots, so loading and saving it costs the
# same however many buckets are in use (a verdict uses one or two of them).
_WIDTHS = (6, 9, 9)
SLOT = sum(_WIDTHS)
_EMPTY_SLOT = "0" * SLOT
Record = dict[str, Any]
# A bucket is written whole again once it is this long and twice what it was then.
COMPACT_FLOOR = 64 * 1024


class CountersLostError(ChainIOError):
    """A bucket is shorter than the state says, or cannot be read: rebuilt from the chain."""


def bucket_of(name: str, value: str) -> str:
    """The bucket a counter's records go in."""
    return hashlib.sha256(f"{name}\0{value}".encode()).hexdigest()[:2]


def record_prefix(name: str, epoch: int, value: str) -> bytes:
    """How every record of one counter begins."""
    return f'{{"b":{json.dumps(name)},"e":{epoch},"v":{json.dumps(value)},"c":'.encode()


def _body(name: str, epoch: int, value: str, counter: Any) -> bytes:
    counter_text = json.dumps(counter, sort_keys=True, separators=(",", ":"))
    return record_prefix(name, epoch, value) + counter_text.encode() + b"}"


class CounterBuckets:
    """The counter buckets as one saved state knows them (their generations and sizes).

    Damage found while reading is noted in ``damage`` (its description, and
    whether records were lost rather than edited), never raised: the fold that
    asked goes on, and its caller decides before trusting or saving anything.
    """

    def __init__(self, directory: Path, mac_key: bytes | None, table: str = "") -> None:
        self.directory = directory
        self.mac_key = mac_key
        self._table = table  # as the state file holds it ("" when no bucket was written)
        self._changed: dict[str, tuple[int, int, int]] = {}
        self.damage: tuple[str, bool] | None = None
        self.bytes_read = 0
        # Generations replaced by the last save, removed once a state naming
        # their successors is on disk.
        self.obsolete: list[Path] = []

    def entry(self, bucket: str) -> tuple[int, int, int]:
        """A bucket's generation, size, and size when last written whole (zeros: none yet).

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
            generation, size = int(slot[:6], 16), int(slot[6:15], 16)
            return generation, size, int(slot[15:], 16)
        except ValueError:
            if not self._table and len(bucket) == len("00"):
                return 0, 0, 0
            raise CountersLostError(f"counter bucket {bucket} is not recorded well") from None

    def _set(self, bucket: str, generation: int, size: int, whole: int) -> None:
        self._changed[bucket] = (generation, size, whole)

    def in_use(self) -> list[str]:
        """The buckets that hold records."""
        return [f"{n:02x}" for n in range(BUCKETS) if self.entry(f"{n:02x}")[1]]

    def table(self) -> str:
        """Every bucket's generation and sizes, as the state file records them."""
        if self._changed:
            slots = [self._table[n * SLOT : (n + 1) * SLOT] or _EMPTY_SLOT for n in range(BUCKETS)]
            for bucket, (generation, size, whole) in self._changed.items():
                slots[int(bucket, 16)] = f"{generation:06x}{size:09x}{whole:09x}"
            self._table = "".join(slots)
            self._changed = {}
        return self._table

    def path(self, bucket: str, generation: int) -> Path:
        """The file of one generation of a bucket."""
        return self.directory / f"{bucket}.{generation}.log"

    def _note(self, problem: str, *, lost: bool) -> None:
        if self.damage is None or (lost and not self.damage[1]):
            self.damage = (problem, lost)

    def _mac(self, bucket: str, generation: int, offset: int, body: bytes) -> bytes:
        assert self.mac_key is not None  # noqa: S101 - a state with buckets has its key
        where = f"{bucket}.{generation}.{offset}\n".encode()
        return hmac.new(self.mac_key, where + body, hashlib.sha256).hexdigest().encode("ascii")

    def read(self, bucket: str) -> bytes | None:
        """The bucket's bytes the state accounts for; ``None`` when it lost some (noted)."""
        try:
            generation, size, _ = self.entry(bucket)
        except CountersLostError as exc:
            self._note(str(exc), lost=True)
            return None
        if size == 0:
            return b""
        try:
            fd = open_regular(self.path(bucket, generation))
        except OSError as exc:
            self._note(f"counter bucket {bucket} unreadable: {exc.strerror}", lost=True)
            return None
        try:
            chunks, left = [], size
            while left and (chunk := os.pread(fd, left, size - left)):
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
        self.bytes_read += size
        return b"".join(chunks)

    def _checked(self, bucket: str, raw: bytes, at: int) -> Record | None:
        """The record of the line at ``at``, its MAC checked; ``None`` when edited (noted)."""
        end = raw.find(b"\n", at)
        body, _, mac = raw[at : end if end >= 0 else len(raw)].rpartition(b" ")
        generation = self.entry(bucket)[0]
        if end < 0 or not hmac.compare_digest(self._mac(bucket, generation, at, body), mac):
            self._note(f"counter bucket {bucket} does not match its MAC (edited?)", lost=False)
            return None
        try:
            record: Record = json.loads(body)
        except ValueError:
            self._note(f"counter bucket {bucket} is malformed", lost=False)
            return None
        return record

    def find(self, name: str, epoch: int, value: str) -> Any:
        """The newest counter of ``value`` in epoch ``epoch`` of budget ``name``, or ``None``."""
        bucket = bucket_of(name, value)
        raw = self.read(bucket)
        if not raw:
            return None
        needle = record_prefix(name, epoch, value)
        at = len(raw)
        while (at := raw.rfind(needle, 0, at)) >= 0:
            if at == 0 or raw[at - 1] == ord("\n"):
                record = self._checked(bucket, raw, at)
                return None if record is None else record["c"]
        return None

    def scan(self, name: str, epoch: int) -> dict[str, Any]:
        """Every counter of budget ``name`` in epoch ``epoch`` (``None``: removed)."""
        prefix = record_prefix(name, epoch, "")[: -len(b'"","c":')]
        newest: dict[str, Any] = {}
        for bucket in self.in_use():
            raw = self.read(bucket)
            for at, line in _lines(raw or b""):
                if line.startswith(prefix):
                    record = self._checked(bucket, raw or b"", at)
                    if record is not None:
                        newest[record["v"]] = record["c"]
        return newest

    def save(
        self, changes: Iterable[tuple[str, int, str, Any]], live: Callable[[Record], bool]
    ) -> None:
        """Write changed counters ``(name, epoch, value, counter)``, each bucket appended to once.

        ``live`` tells a record worth keeping when a bucket is written whole.

        Raises:
            CountersLostError: a bucket is shorter than the state says.
            ChainIOError: a bucket cannot be written.
        """
        by_bucket: dict[str, list[tuple[str, int, str, bytes]]] = {}
        for name, epoch, value, counter in changes:
            body = _body(name, epoch, value, counter)
            by_bucket.setdefault(bucket_of(name, value), []).append((name, epoch, value, body))
        for bucket, bodies in sorted(by_bucket.items()):
            self._save_bucket(bucket, [body for *_, body in bodies], live)

    def _save_bucket(
        self, bucket: str, bodies: list[bytes], live: Callable[[Record], bool]
    ) -> None:
        generation, size, whole = self.entry(bucket)
        path = self.path(bucket, generation)
        try:
            actual = path.stat().st_size
        except FileNotFoundError:
            actual = 0
        except OSError as exc:
            raise ChainIOError(f"cannot write counter bucket {bucket}: {exc.strerror}") from exc
        if actual < size:
            raise CountersLostError(f"counter bucket {bucket} lost records")
        adding = sum(len(body) + 66 for body in bodies)
        if actual > size or size + adding > max(COMPACT_FLOOR, 2 * whole):
            self._rewrite(bucket, bodies, live)
            return
        self._set(bucket, generation, self._write(bucket, generation, size, bodies), whole)

    def _write(self, bucket: str, generation: int, offset: int, bodies: list[bytes]) -> int:
        """Append MAC'd lines to a generation at ``offset`` (its end); the new size."""
        lines = []
        for body in bodies:
            lines.append(body + b" " + self._mac(bucket, generation, offset, body) + b"\n")
            offset += len(lines[-1])
        path = self.path(bucket, generation)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                data = memoryview(b"".join(lines))
                while data:
                    data = data[os.write(fd, data) :]
            finally:
                os.close(fd)
        except OSError as exc:
            raise ChainIOError(f"cannot write counter bucket {bucket}: {exc.strerror}") from exc
        return offset

    def _rewrite(self, bucket: str, bodies: list[bytes], live: Callable[[Record], bool]) -> None:
        """Write a bucket whole as its next generation: its newest live records, then ``bodies``."""
        raw = self.read(bucket)
        if raw is None or self.damage is not None:
            raise CountersLostError(self.damage[0] if self.damage else f"counter bucket {bucket}")
        newest: dict[tuple[str, int, str], bytes] = {}
        for at, line in _lines(raw):
            record = self._checked(bucket, raw, at)
            if record is None:
                raise CountersLostError(f"counter bucket {bucket} does not match its MAC")
            if record["c"] is not None and live(record):
                newest[(record["b"], record["e"], record["v"])] = line.rpartition(b" ")[0]
            else:
                newest.pop((record["b"], record["e"], record["v"]), None)
        kept = list(newest.values())
        generation = self.entry(bucket)[0] + 1
        fresh = self.path(bucket, generation)
        with contextlib.suppress(FileNotFoundError):
            fresh.unlink()  # left by a save that never finished
        size = self._write(bucket, generation, 0, kept + bodies)
        self.obsolete.append(self.path(bucket, generation - 1))
        self._set(bucket, generation, size, size)

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
                by_bucket.setdefault(bucket_of(name, value), []).append(
                    _body(name, epoch, value, counter)
                )
        self._table, self._changed = "", {}
        for bucket, bodies in sorted(by_bucket.items()):
            size = self._write(bucket, generation, 0, bodies)
            self._set(bucket, generation, size, size)
        self.obsolete = existing

    def remove_obsolete(self) -> None:
        """Remove generations no saved state names any more."""
        for path in self.obsolete:
            with contextlib.suppress(OSError):
                path.unlink()
        self.obsolete = []


def _generation(path: Path) -> int:
    parts = path.name.split(".")
    try:
        return int(parts[1]) if len(parts) == len(("bucket", "generation", "log")) else 0
    except ValueError:
        return 0


def _lines(raw: bytes) -> Iterable[tuple[int, bytes]]:
    at = 0
    while at < len(raw):
        end = raw.find(b"\n", at)
        if end < 0:
            end = len(raw)
        yield at, raw[at:end]
        at = end + 1
