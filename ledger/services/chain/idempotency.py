"""Idempotency keys: finding the first entry sealed with a key (SPEC §3).

The key index is derived state (one small MAC'd record per key, kept by the
``StateStore``); a lookup is held against the counter it was loaded with, or,
when that counter cannot be trusted, against the chain itself.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ledger.errors import ChainIOError, InputDataError, StateMismatchError
from ledger.services.chain.counter import Counter
from ledger.services.chain.key_records import index_records
from ledger.services.ports import ChainStore, StateStore

if TYPE_CHECKING:
    from ledger.services.ports import EntryPosition


def find_duplicate(
    counter: Counter, deps: "DuplicateDeps", key: str, event_type: str
) -> dict[str, Any] | None:
    """The first entry sealed with idempotency ``key``, if the chain holds one.

    Looked up in the key index (one file), or among the keys folded by this
    load and not yet saved. A trusted counter vouches for the index up to its
    own length; an untrusted one does not, so the entry is then checked in the
    chain itself (slow, but only a damaged home takes that path). A key used by
    another event type is not a duplicate of this one.
    """
    record = find_indexed(counter, deps, key)
    if record is None or record.get("event_type") != event_type:
        return None
    return record


def other_record_message(
    key: str, first: dict[str, Any], provider: str, actual_micros: int | None, model: str | None
) -> str | None:
    """Why ``key`` cannot be reused for this record, or ``None`` when it is the same record.

    A key is for retrying one record: the same provider, amount and model again
    is a duplicate; anything else is another call that would silently not be
    counted, so it is refused with the first record named.
    """
    body = first.get("payload") or {}
    if (body.get("provider"), body.get("actual_micros"), body.get("model_id")) == (
        provider,
        actual_micros,
        model,
    ):
        return None
    from ledger.core.refs import short_ref
    from ledger.core.units import usd_text

    sealed = body.get("actual_micros")
    amount = usd_text(sealed) if isinstance(sealed, int) else "unpriced"
    model_text = f" model {body.get('model_id')}" if body.get("model_id") else ""
    return (
        f"--idempotency-key {key} was first used for another record (entry "
        f"{short_ref(str(first.get('entry_hash')))}…: {amount} {body.get('provider')}"
        f"{model_text}, {body.get('utc_day')}); nothing recorded: a key is for retrying the "
        "same record, give each call its own"
    )


def find_indexed(counter: Counter, deps: "DuplicateDeps", key: str) -> dict[str, Any] | None:
    """The key index record of ``key`` (any kind), held against the chain as above.

    A counter rebuilt from the whole chain holds every key itself; an index
    that lost records is passed over for the chain.
    """
    record: Any = next((r for r in counter.new_keys if r.get("key") == key), None)
    if record is None and not counter.rebuilt:
        try:
            record = deps.states.load_key(key)
        except StateMismatchError:
            return _chain_record(deps.chain, key)
        if isinstance(record, Sequence):
            # Left the hot index: the entries its tag names are read and the
            # key compared in the chain itself.
            record = _cold_record(deps.chain, key, record)
    if record is None:
        return None
    number = record.get("entry")
    if counter.problem is None and isinstance(number, int) and number >= 1:
        return record if number <= int(counter.data["meta"]["entries"]) else None
    return record if _chain_holds(deps.chain, str(record.get("entry_hash"))) else None


def _chain_record(store: ChainStore, key: str) -> dict[str, Any] | None:
    """The key index record of ``key`` found by reading the chain (an index that lost records)."""
    from ledger.core.envelope import parse_line

    number = 0
    try:
        for raw in store.iter_lines():
            number += 1
            try:
                parsed = parse_line(raw.rstrip(b"\n"))
            except (ValueError, InputDataError):
                continue
            for record in index_records(
                parsed.event_type, parsed.payload, parsed.entry_hash, number, parsed.ts_utc
            ):
                if record["key"] == key:
                    return record
    except ChainIOError:
        return None
    return None


def _cold_record(
    store: ChainStore, key: str, positions: "Sequence[EntryPosition]"
) -> dict[str, Any] | None:
    """The record of ``key`` among the entries at ``positions`` (read from the chain)."""
    from ledger.core.envelope import parse_line

    for where in positions:
        if where.offset is None:
            return _chain_record(store, key)
        try:
            raw = next(iter(store.iter_lines(where.offset)), b"")
            parsed = parse_line(raw.rstrip(b"\n"))
        except (ValueError, InputDataError, ChainIOError):
            return _chain_record(store, key)  # not the entry the index says: read it all
        for record in index_records(
            parsed.event_type, parsed.payload, parsed.entry_hash, where.entry, parsed.ts_utc,
            where.offset,
        ):  # fmt: skip
            if record["key"] == key:
                return record
    return None


def _chain_holds(store: ChainStore, entry_hash: str) -> bool:
    from ledger.core.envelope import parse_line

    try:
        for raw in store.iter_lines():
            try:
                if parse_line(raw.rstrip(b"\n")).entry_hash == entry_hash:
                    return True
            except (ValueError, InputDataError):
                continue
    except ChainIOError:
        return False
    return False


class DuplicateDeps(Protocol):
    """What a duplicate lookup needs."""

    @property
    def chain(self) -> ChainStore:
        """The chain."""
        ...

    @property
    def states(self) -> StateStore:
        """The derived-state store."""
        ...


def remember_keys_untrusted(counter: Counter, states: StateStore) -> None:
    """Index keys sealed while the counter is untrusted (the state is not saved then).

    Lookups on an untrusted counter check each indexed key in the chain, so an
    index that runs ahead of the stored state is safe.
    """
    if counter.problem is not None and counter.new_keys:
        try:
            states.save_keys(counter.new_keys)
        except ChainIOError:
            return
        counter.new_keys = []
