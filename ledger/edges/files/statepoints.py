"""Derived state kept at points along the chain: ``state/points/NNNNNNNNNNNN.json``.

``explain REF`` needs the state *before* a verdict, not at the head. Folding
the chain from line 1 up to it grows with the chain, so the state is kept, now
and then (every ``POINT_EVERY`` entries folded, ``ledger.services.chain.state``),
at the entry it was folded to: explain starts from the nearest point before
the verdict and folds only the entries between, whatever the chain's length.

A point is derived state like ``derived.json``: JSON and its HMAC-SHA256 under
the state's own MAC key, in a domain of its own (a point is never taken for
the state file, nor the state file for a point); a point that fails its MAC,
or that cannot be read, is no point (the caller folds from further back). Only
a state held wholly in the document is kept (a budget's per-value counters
kept in the index belong to the index's newest save, not to a point). The
newest ``KEEP`` points are kept; older ones are removed as new ones are made. A
key rotation marks them verified under the new trust store, as it does the
state (every entry before it still verifies).
"""

import contextlib
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any, NamedTuple

from ledger.edges.fileio import atomic_write, read_regular
from ledger.edges.files.statemac import mac_key
from ledger.errors import ChainIOError

KEEP = 64
_DOMAIN = b"ledger state point\n"
_SUFFIX = ".json"


class StatePoint(NamedTuple):
    """The derived state folded up to entry ``entries`` (chain bytes ``size``)."""

    entries: int
    size: int
    head_hash: str
    data: dict[str, Any]


def _mac(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, _DOMAIN + body, hashlib.sha256).hexdigest().encode("ascii")


class StatePoints:
    """The points of one home's derived state."""

    def __init__(self, directory: Path, mac_key_path: Path) -> None:
        self.directory = directory
        self.mac_key_path = mac_key_path

    def keep(self, entries: int, size: int, head_hash: str, data: dict[str, Any]) -> bool:
        """Keep the state ``data`` as folded up to entry ``entries``; whether it was kept.

        Not kept (``False``) when the state is not wholly in the document, or
        nothing can be written: points are a cache, never needed for a verdict.
        """
        try:
            body = json.dumps(
                {"entries": entries, "size": size, "head_hash": head_hash, "data": data},
                sort_keys=True, separators=(",", ":"),
            ).encode("utf-8")  # fmt: skip
        except (TypeError, ValueError):
            return False  # counters kept in the index: not a whole state
        try:
            key = mac_key(self.mac_key_path, create=True)
            if key is None:
                return False
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"{entries:012d}{_SUFFIX}"
            atomic_write(path, body + b"\n" + _mac(key, body) + b"\n", 0o600, durable=False)
        except (ChainIOError, OSError):
            return False
        self._prune()
        return True

    def nearest(self, before_line: int) -> StatePoint | None:
        """The newest readable point folded to an entry before line ``before_line``."""
        for entries in reversed(self._numbers()):
            if entries >= before_line:
                continue
            found = self._read(entries)
            if found is not None:
                return found
        return None

    def _read(self, entries: int) -> StatePoint | None:
        try:
            key = mac_key(self.mac_key_path, create=False)
            raw = read_regular(self.directory / f"{entries:012d}{_SUFFIX}")
        except (ChainIOError, OSError):
            return None
        body, _, mac = raw.rstrip(b"\n").rpartition(b"\n")
        if key is None or not hmac.compare_digest(_mac(key, body), mac):
            return None
        try:
            document = json.loads(body)
            point = StatePoint(
                int(document["entries"]), int(document["size"]), str(document["head_hash"]),
                document["data"],
            )  # fmt: skip
        except (ValueError, KeyError, TypeError):
            return None
        if point.entries != entries or not isinstance(point.data, dict):
            return None
        return point

    def _numbers(self) -> list[int]:
        try:
            names = [path.name for path in self.directory.iterdir()]
        except OSError:
            return []
        numbers = []
        for name in names:
            stem = name.removesuffix(_SUFFIX)
            if name.endswith(_SUFFIX) and stem.isdigit():
                numbers.append(int(stem))
        return sorted(numbers)

    def _prune(self) -> None:
        for entries in self._numbers()[:-KEEP]:
            with contextlib.suppress(OSError):
                (self.directory / f"{entries:012d}{_SUFFIX}").unlink()

    def carry_trust_over(self, before: str, after: str) -> None:
        """Mark the points verified under trust store ``before`` as verified under ``after``."""
        for entries in self._numbers():
            point = self._read(entries)
            if point is None or point.data.get("meta", {}).get("trust") != before:
                continue
            data = {**point.data, "meta": {**point.data["meta"], "trust": after}}
            self.keep(point.entries, point.size, point.head_hash, data)
