"""Spend a recovery must not drop: the records after the damage, chosen as pure values.

A recovery restores the longest valid prefix of a damaged chain; the lines
after it no longer link, but many of them are honest records of money spent.
Every ``budget.record_call`` line after the last restored one is carried onto
the recovered chain, sealed again by the home's key:

- one whose own signature verifies (a key the trust store trusts at its time)
  is honest spend: ``verified`` is true;
- one whose signature does not verify (the edited line itself, an unsigned
  line) is kept as evidence, and its amount is still counted, fail-closed,
  until an operator re-bases the scope with ``reconcile --force-reason``;
  ``verified`` is false.

A record whose idempotency key the restored chain (or an earlier carried
record) already holds is not carried: it is counted already. Lines that do
not parse as entries (a torn tail), and records whose payload no longer fits
the record schema, carry no amount anyone can read: they stay in the evidence.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.core.envelope import EnvelopeFormatError, ParsedEntry, parse_line
from ledger.core.trust import TrustStore

RECORD_EVENT = "budget.record_call"
# Fields a carried record does not keep: they tie it to the request that sealed it.
_NOT_CARRIED = frozenset({"request_id"})


@dataclass(frozen=True, slots=True)
class Carried:
    """One record after the damage, to be sealed again on the recovered chain."""

    line: int
    entry_hash: str
    verified: bool
    payload: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        """How ``ledger.recovered`` names it: its line, its hash, and whether it verified."""
        return {
            "line": self.line,
            "entry_hash": self.entry_hash,
            "verified": self.verified,
            "actual_micros": self.payload.get("actual_micros"),
        }


def _parsed(raw: bytes) -> ParsedEntry | None:
    if not raw.endswith(b"\n") or raw.startswith(b"["):
        return None
    try:
        return parse_line(raw[:-1])
    except EnvelopeFormatError:
        return None


def _record_keys(lines: Iterable[bytes]) -> set[str]:
    keys: set[str] = set()
    for raw in lines:
        parsed = _parsed(raw)
        if parsed is not None and parsed.event_type == RECORD_EVENT:
            key = parsed.payload.get("idempotency_key")
            if isinstance(key, str):
                keys.add(key)
    return keys


def records_after_damage(
    damaged: Sequence[bytes],
    restored: Sequence[bytes],
    last_kept_line: int,
    trust: TrustStore,
    conforms: Callable[[Any], bool],
) -> tuple[Carried, ...]:
    """The records of ``damaged`` after line ``last_kept_line`` that the recovery carries.

    Args:
        damaged: the damaged file's raw lines.
        restored: the lines of the restored chain.
        last_kept_line: the damaged file's last line (from 1) the restored chain holds.
        trust: the home's trust store.
        conforms: whether a payload fits the ``budget.record_call`` schema.
    """
    counted = _record_keys(restored)
    carried: list[Carried] = []
    for number, raw in enumerate(damaged, start=1):
        if number <= last_kept_line:
            continue
        parsed = _parsed(raw)
        if parsed is None or parsed.event_type != RECORD_EVENT:
            continue
        key = parsed.payload.get("idempotency_key")
        if isinstance(key, str):
            if key in counted:
                continue
            counted.add(key)
        payload = {k: v for k, v in parsed.payload.items() if k not in _NOT_CARRIED}
        if not conforms(payload):
            continue
        verified = trust.signature_problem(parsed, strict=True) is None
        carried.append(Carried(number, parsed.entry_hash, verified, payload))
    return tuple(carried)


__all__ = ["Carried", "records_after_damage"]
