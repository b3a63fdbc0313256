"""Recording a call's actual spend: ``record`` (SPEC §4, §7–8).

Spend is never refused. A record is sealed under the chain lock and settles
the reservation its verdict made; a record that cannot reach the store is
kept in the home's spool and sealed later, exactly once.
"""

from typing import TYPE_CHECKING, Any, cast

from ledger.core.refs import FULL_REF_DIGITS, short_ref
from ledger.core.response_keys import another_call, verdict_key
from ledger.core.seal import chain_time
from ledger.core.timefmt import budget_day, format_ts, utc_day
from ledger.errors import LedgerError, StoreUnreachableError, UsageError
from ledger.services.chain.budget_restate import restate_budgets_unlocked
from ledger.services.chain.idempotency import (
    find_duplicate,
    other_record_message,
    remember_keys_untrusted,
)
from ledger.services.chain.state import fold_sealed, load_counter, save_counter
from ledger.services.chain.writer import Writer
from ledger.services.gate.forwarded import charged_at_expiry
from ledger.services.gate.record_outcome import RecordOutcome
from ledger.services.gate.spool import SpoolStore, spool_record

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger.services.gate.deps import GateDeps


def record_call(
    deps: "GateDeps",
    actual_micros: int | None,
    provider: str,
    verdict_ref: str | None = None,
    model_id: str | None = None,
    cycle_id: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    idempotency_key: str | None = None,
    details: dict[str, Any] | None = None,
    *,
    same_record_only: bool = False,
) -> RecordOutcome:
    """Record actual spend and settle its reservation. Spend is never refused.

    ``actual_micros`` is ``None`` for a call whose model has no price: the
    record is sealed all the same (SPEC §7), with its token counts in
    ``details``, and the gate halts until it is priced.

    With ``idempotency_key``, a key already sealed in the chain writes nothing
    and returns the first record (``duplicate``): the lookup and the append
    are one step under the chain lock, so concurrent repeats seal exactly one.
    With ``same_record_only`` (a caller that names its own keys: the command
    line, the Python API), a key first sealed for another provider, amount or
    model is refused instead (``UsageError``), and nothing is written.

    A database store that cannot be reached keeps the record in the home's
    spool (SPEC §8): ``spooled`` is set, and the record is sealed exactly once,
    by its idempotency key, by the next write that reaches the store.

    Raises:
        LockTimeoutError: the chain lock stayed busy.
        ChainIOError: the chain cannot be appended to (e.g. a torn tail).
        StoreUnreachableError: the store cannot be reached and there is no spool.
    """
    request: dict[str, Any] = {
        "actual_micros": actual_micros, "provider": provider, "verdict_ref": verdict_ref,
        "model_id": model_id, "cycle_id": cycle_id, "input_tokens": input_tokens,
        "output_tokens": output_tokens, "idempotency_key": idempotency_key, "details": details,
    }  # fmt: skip
    if deps.config.budgets:
        # A changed [[budgets]] is counted afresh here, not under the lock (``budget_restate``).
        restate_budgets_unlocked(deps)
    try:
        return _seal_record(deps, request, same_record_only=same_record_only)
    except StoreUnreachableError:
        if getattr(deps, "spool", None) is None:
            raise
        return spool_record(cast("Any", deps), request)


def whole_ref(
    reservations: dict[str, Any],
    prefix: str,
    entries: "Callable[[str], list[str]] | None" = None,
) -> tuple[str | None, str | None]:
    """The verdict a short ``--verdict-ref`` names; else ``None`` and why.

    A prefix of exactly one open reservation's ref names it. Else the chain's
    entries are asked (``entries``: the whole hashes the ref index finds for a
    prefix), so a verdict that expired, was settled or was charged at its
    estimate is recognised as it would be by its whole ref. A prefix that
    names more than one entry is a bad command line, found before anything is
    written; one that names none is recorded without a ref (spend is never
    refused for it), with a warning.

    Raises:
        UsageError: the prefix names more than one entry.
    """
    matches = [ref for ref in reservations if ref.startswith(prefix)]
    if len(matches) == 1:
        return matches[0], None
    found = entries(prefix) if entries is not None and not matches else []
    if len(found) == 1:
        return found[0], None
    if len(matches) > 1 or len(found) > 1:
        raise UsageError(f"--verdict-ref: {prefix} names more than one verdict: give more digits")
    return (
        None,
        f"verdict_ref {prefix}… names no open reservation; recorded anyway, settling nothing",
    )


def _indexed_refs(deps: Any, counter: Any) -> "Callable[[str], list[str]] | None":
    """The whole hashes of the entries a prefix names: the ref index and what the load folded.

    ``None`` when the counter cannot vouch for the index (untrusted) or there is
    no index: the prefix then names only what the open reservations hold.
    """
    finder = getattr(deps.states, "find_refs", None)
    if finder is None or counter.problem is not None:
        return None

    def entries(prefix: str) -> list[str]:
        from ledger.services.chain.refs import holds

        found = {ref for ref, _line, _offset in counter.new_refs if ref.startswith(prefix)}
        try:
            matches = finder(prefix, 2)
        except LedgerError:
            return sorted(found)
        for match in matches:
            offset = match.position.offset
            if offset is not None and holds(deps.chain, offset, match.entry_hash):
                found.add(match.entry_hash)
        return sorted(found)

    return entries


def _beyond_charge(request: dict[str, Any], charged: int) -> dict[str, Any]:
    actual = request["actual_micros"]
    details = {**(request["details"] or {}), "charged_at_expiry_micros": charged}
    beyond = None if actual is None else max(0, actual - charged)
    return {**request, "actual_micros": beyond, "details": details}


def _at_least_estimate(request: dict[str, Any], reservation: dict[str, Any]) -> dict[str, Any]:
    """A record whose usage names what has no price here, raised to its verdict's estimate.

    What was priced is kept beside it (``usage_micros``), so the unknown part
    of a call is never taken as free.
    """
    details = request["details"] or {}
    actual, estimate = request["actual_micros"], reservation.get("micros")
    if not details.get("unknown_usage") or actual is None or not isinstance(estimate, int):
        return request
    if actual >= estimate:
        return request
    raised = {**details, "usage_micros": details.get("usage_micros", actual)}
    return {**request, "actual_micros": estimate, "details": raised}


def _seen_by_another_path(
    first: dict[str, Any],
    verdict_ref: str | None,
    recorded_by: str | None,
    reservations: dict[str, Any],
) -> bool:
    """Whether ``first`` is this response recorded by another path, this verdict still held."""
    return (
        recorded_by is not None
        and verdict_ref is not None
        and verdict_ref in reservations
        and first.get("verdict_ref") != verdict_ref
        and first.get("recorded_by") != recorded_by
    )


def _release_only(request: dict[str, Any], key: str) -> dict[str, Any]:
    """A $0 record settling the request's reservation: its spend is counted by another record."""
    details = request["details"] or {}
    scope = ("agent", "tags", "key", "recorded_by")
    kept = {name: details[name] for name in scope if name in details}
    return {
        **request, "idempotency_key": key, "actual_micros": 0, "input_tokens": None,
        "output_tokens": None, "details": kept,
    }  # fmt: skip


_RECORD = "budget.record_call"


def _first_record(
    counter: Any, deps: "GateDeps", request: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The request under the key it is sealed with, and the record first sealed with that key.

    A response id the same path recorded for another verdict (a server reusing
    ids) is another call, under a key naming its verdict (a retry of it finds
    that key). The same response recorded by another path still counts once;
    this verdict's reservation is released by a $0 record under such a key.
    """
    key: str = request["idempotency_key"]
    verdict_ref: str | None = request["verdict_ref"]
    first = find_duplicate(counter, deps, key, _RECORD)
    recorded_by = (request["details"] or {}).get("recorded_by")
    if first is None or verdict_ref is None:
        return request, first
    if another_call(first["payload"], verdict_ref, recorded_by):
        key = verdict_key(key, verdict_ref)
        request = {**request, "idempotency_key": key}
        return request, find_duplicate(counter, deps, key, _RECORD)
    reservations = counter.data["usd"]["reservations"]
    if _seen_by_another_path(first["payload"], verdict_ref, recorded_by, reservations):
        released = _release_only(request, verdict_key(key, verdict_ref))
        return released, find_duplicate(counter, deps, released["idempotency_key"], _RECORD)
    return request, first


def _seal_record(
    deps: "GateDeps", request: dict[str, Any], *, same_record_only: bool = False
) -> RecordOutcome:
    """Seal one ``record_call`` request (its arguments by name) under the chain lock.

    The request is the same mapping the spool keeps, so a spooled record is
    sealed later by exactly this step.
    """
    verdict_ref: str | None = request["verdict_ref"]
    idempotency_key: str | None = request["idempotency_key"]
    writer = Writer(deps)
    writer.signer()  # fail before the lock when there is no usable key
    with deps.chain.transaction() as tx:
        counter = load_counter(tx, deps)
        if idempotency_key is not None:
            request, first = _first_record(counter, deps, request)
            idempotency_key = request["idempotency_key"]
            if first is not None:
                save_counter(counter, deps.states)
                other = other_record_message(
                    idempotency_key, first, request["provider"], request["actual_micros"],
                    request["model_id"],
                )  # fmt: skip
                if same_record_only and other is not None:
                    raise UsageError(other)
                body = first["payload"]
                return RecordOutcome(
                    first["entry_hash"], str(body.get("utc_day")), bool(body.get("settled")),
                    None, duplicate=True, payload=body, budget_day=body.get("budget_day"),
                )  # fmt: skip
        head_ts = counter.head.ts_utc if counter.head is not None else None
        now = chain_time(deps.clock.now(), head_ts)
        day, spend_utc_day = budget_day(now, deps.config.day_zone), utc_day(now)
        warning = None
        settled = False
        if verdict_ref is not None and len(verdict_ref) < FULL_REF_DIGITS:
            verdict_ref, warning = whole_ref(
                counter.data["usd"]["reservations"], verdict_ref, _indexed_refs(deps, counter)
            )
        if verdict_ref is not None:
            reservation = counter.data["usd"]["reservations"].get(verdict_ref)
            charged = None if reservation is not None else charged_at_expiry(
                counter, deps, verdict_ref
            )  # fmt: skip
            if charged is not None:
                # Charged at its estimate when its reservation expired unrecorded:
                # this record adds only what the call cost beyond that.
                request = _beyond_charge(request, charged)
                warning = (
                    f"verdict_ref {short_ref(verdict_ref)}… was charged at its estimate when it "
                    "expired; recorded what the call cost beyond that"
                )
            elif reservation is None:
                warning = (
                    f"verdict_ref {short_ref(verdict_ref)}… is unknown, expired or already "
                    "settled; recorded anyway"
                )
            elif reservation["expires_at"] <= format_ts(now):
                warning = f"verdict_ref {short_ref(verdict_ref)}… has expired; recorded anyway"
            else:
                settled = True
                request = _at_least_estimate(request, reservation)
                # SPEC §4: a settled record counts on its reservation's budget
                # day, so a call admitted before midnight and recorded after it
                # never pushes the new day past its cap. The payload's
                # utc_day is that verdict's UTC day, as it always was.
                day = reservation.get("budget_day") or reservation["utc_day"]
                spend_utc_day = reservation["utc_day"]
        payload = {
            "provider": request["provider"],
            "actual_micros": request["actual_micros"],
            "utc_day": spend_utc_day,
            "budget_day": day,
            "verdict_ref": verdict_ref,
            "settled": settled,
            "model_id": request["model_id"],
            "cycle_id": request["cycle_id"],
            "input_tokens": request["input_tokens"],
            "output_tokens": request["output_tokens"],
            "idempotency_key": idempotency_key,
            **(request["details"] or {}),
        }
        sealed = writer.append(tx, "budget.record_call", payload, now=now)
        fold_sealed(counter, sealed, tx.head())
        save_counter(counter, deps.states)
        remember_keys_untrusted(counter, deps.states)
    return RecordOutcome(
        sealed.entry_hash, spend_utc_day, settled, warning, payload=payload, budget_day=day
    )


def drain_spool(deps: "GateDeps") -> int:
    """Seal every spooled record of this host by its key; returns how many left the spool.

    Stops at the first record the store still cannot take (it stays spooled).

    Raises:
        LedgerError: reading a record's outcome failed in a way that is not an
            unreachable store.
    """
    spool: SpoolStore | None = getattr(deps, "spool", None)
    if spool is None:
        return 0
    drained = 0
    for document in spool.entries():
        request = document["request"]
        outcome = record_call(deps, **request)
        if outcome.spooled:
            break
        spool.remove(document["key"])
        drained += 1
    return drained
