"""What recording a call answers, shared by the record path and the spool below it."""

from typing import Any, NamedTuple


class RecordOutcome(NamedTuple):
    """A recorded call (or, for a repeated idempotency key, the first one)."""

    entry_hash: str
    utc_day: str
    settled: bool
    warning: str | None
    duplicate: bool = False
    payload: dict[str, Any] | None = None
    spooled: bool = False
    budget_day: str | None = None
