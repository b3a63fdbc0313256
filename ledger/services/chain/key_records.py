"""The derived index's records of one entry: its ref, its idempotency key, its served request.

The one place the index is derived from the chain: the fold of a catch-up or
rebuild and the fold of an entry just sealed both take their records here.
"""

from collections.abc import Iterator
from typing import Any

from ledger.core.state import idempotency_record
from ledger.services.chain.requests import request_record

_HASH_BYTES = 32
_INT_BYTES = 8
_NO_OFFSET = (1 << 63) - 1
_ROW = _HASH_BYTES + 2 * _INT_BYTES


class PackedRefs:
    """Entry refs (hash, line from 1, byte offset) folded and not saved yet, 48 bytes each.

    A rebuild folds every entry of the chain: as dicts their refs would cost
    hundreds of bytes each.
    """

    __slots__ = ("_rows",)

    def __init__(self) -> None:
        self._rows = bytearray()

    def append(self, entry_hash: str, entry: int, offset: int | None) -> None:
        """Remember one entry's position."""
        self._rows += bytes.fromhex(entry_hash)
        self._rows += entry.to_bytes(_INT_BYTES, "big")
        self._rows += (_NO_OFFSET if offset is None else offset).to_bytes(_INT_BYTES, "big")

    def __len__(self) -> int:
        return len(self._rows) // _ROW

    def __iter__(self) -> Iterator[tuple[str, int, int | None]]:
        rows = self._rows
        for at in range(0, len(rows), _ROW):
            offset = int.from_bytes(rows[at + _HASH_BYTES + _INT_BYTES : at + _ROW], "big")
            yield (
                rows[at : at + _HASH_BYTES].hex(),
                int.from_bytes(rows[at + _HASH_BYTES : at + _HASH_BYTES + _INT_BYTES], "big"),
                None if offset == _NO_OFFSET else offset,
            )

    def clear(self) -> None:
        """Forget them (saved)."""
        self._rows = bytearray()


def index_entry(
    keys: list[dict[str, Any]],
    refs: PackedRefs | None,
    event_type: str,
    payload: dict[str, Any],
    entry_hash: str,
    number: int,
    ts_utc: str | None = None,
    offset: int | None = None,
) -> None:
    """Note one entry's index records: its ref in ``refs``, its keys' records in ``keys``."""
    if refs is not None and number >= 1:
        refs.append(entry_hash, number, offset)
    keys.extend(index_records(event_type, payload, entry_hash, number, ts_utc, offset))


def index_records(
    event_type: str,
    payload: dict[str, Any],
    entry_hash: str,
    number: int,
    ts_utc: str | None = None,
    offset: int | None = None,
) -> list[dict[str, Any]]:
    """The key index records of one entry (``number`` from 1; 0: its position is unknown).

    The records of its idempotency key and of its served request; each carries
    the entry's time (keys leave the hot index by it) and byte offset.
    """
    records: list[dict[str, Any]] = []
    for record in (
        idempotency_record(event_type, payload, entry_hash, number),
        request_record(payload, entry_hash, event_type, number),
    ):
        if record is not None:
            if ts_utc is not None:
                record["ts"] = ts_utc
            if offset is not None:
                record["offset"] = offset
            records.append(record)
    return records
