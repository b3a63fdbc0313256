"""The key index's records of one entry: what its idempotency key and its served request index."""

from typing import Any

from ledger.core.state import idempotency_record
from ledger.services.chain.requests import request_record


def index_records(
    event_type: str, payload: dict[str, Any], entry_hash: str, number: int
) -> list[dict[str, Any]]:
    """The key index records of one entry: its idempotency key's, its served request's."""
    records = []
    keyed = idempotency_record(event_type, payload, entry_hash, number)
    if keyed is not None:
        records.append(keyed)
    served = request_record(payload, entry_hash, event_type, number)
    if served is not None:
        records.append(served)
    return records
