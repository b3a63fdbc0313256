"""Forwarded calls that were never recorded: charged at their estimate once expired.

The gateway marks the reservation of every request it forwards (the verdict
that admits it says so, so marking costs no extra write). When the process
dies before the call's record, nothing would ever settle that reservation,
and releasing it at expiry would make a call the provider served cost $0. So
a forwarded reservation is held until a record settles it; once it has
expired, the next verdict seals that record itself: the call at its estimate,
in the same transaction (and fsync) as the verdict. A late record of the
call's own usage then counts only what it adds to that charge.
"""

import datetime as dt
from typing import Any

from ledger.core.spend import expired_forwarded
from ledger.services.chain.counter import Counter
from ledger.services.chain.idempotency import find_indexed
from ledger.services.chain.state import fold_sealed
from ledger.services.chain.writer import Writer

CHARGE_KEY_PREFIX = "expired:"


def charge_key(verdict_ref: str) -> str:
    """The idempotency key of the charge of an expired forwarded reservation."""
    return f"{CHARGE_KEY_PREFIX}{verdict_ref}"


def charge_expired_forwarded(writer: Writer, tx: Any, counter: Counter, now: dt.datetime) -> int:
    """Seal a record at its estimate for each forwarded reservation expired by ``now``.

    Returns how many were charged.
    """
    due = expired_forwarded(counter.data["usd"], now)
    for ref, reservation in due:
        payload = {
            "provider": reservation.get("provider") or "unknown",
            "actual_micros": reservation["micros"],
            "utc_day": reservation["utc_day"],
            "budget_day": reservation["budget_day"],
            "verdict_ref": ref,
            "settled": True,
            "model_id": None,
            "cycle_id": None,
            "input_tokens": None,
            "output_tokens": None,
            "idempotency_key": charge_key(ref),
        }
        sealed = writer.append(tx, "budget.record_call", payload, now=now)
        fold_sealed(counter, sealed, tx.head())
    return len(due)


def charged_at_expiry(counter: Counter, deps: Any, verdict_ref: str) -> int | None:
    """What the call of ``verdict_ref`` was charged when its reservation expired, if it was."""
    found = find_indexed(counter, deps, charge_key(verdict_ref))
    if found is None or found.get("event_type") != "budget.record_call":
        return None
    micros = (found.get("payload") or {}).get("actual_micros")
    return micros if isinstance(micros, int) and not isinstance(micros, bool) else None
