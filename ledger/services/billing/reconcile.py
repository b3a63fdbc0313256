"""Reconcile the local counter with the provider's bill, and rebuild derived state."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from ledger.core.observation import Deferred, Reading, Unreachable, reading_payload
from ledger.core.reconcile import drift_pct, pct_text
from ledger.core.seal import chain_time
from ledger.core.spend import scope_state
from ledger.core.timefmt import budget_day, utc_day
from ledger.errors import EXIT_HALT, EXIT_OK, EXIT_USAGE, LedgerError
from ledger.services.billing.poll import PollDeps, billing_lock
from ledger.services.chain.counter import Counter
from ledger.services.chain.findings import describe_finding, stored_finding
from ledger.services.chain.rebuild_aside import AsideStore, catch_up, fold_aside, save_aside
from ledger.services.chain.state import fold_sealed, load_counter, save_counter
from ledger.services.chain.writer import Writer
from ledger.services.gate.deps import GateDeps

if TYPE_CHECKING:
    from ledger.services.gate.prices import PriceDeps


class ReconcileDeps(PollDeps, Protocol):
    """What reconciling needs: the gate's ports and named locks."""


@dataclass(frozen=True, slots=True)
class ReconcileOutcome:
    """One scope's reconciliation."""

    provider: str
    status: str  # ok | blocker | forced | unreachable | defer | untrusted
    exit_code: int
    counter_micros: int | None
    billing_micros: int | None
    drift_pct: str | None
    blocking: bool
    reason: str | None
    entry_hash: str | None


def reconcile(
    deps: ReconcileDeps, provider: str = "aggregate", force_reason: str | None = None
) -> ReconcileOutcome:
    """Run the observer for one scope and record how far the counter drifted.

    Holds the reconcile lock throughout so two reconciles never interleave, and
    the provider's billing lock so a poll never reads the same bill meanwhile;
    the chain lock is taken only to append, never while the observer runs.

    Raises:
        LockTimeoutError: a lock stayed busy.
        ChainIOError: the chain cannot be appended to.
    """
    writer = Writer(deps)
    writer.signer()  # no usable key: fail before creating any lock file
    with deps.exclusive("reconcile"), billing_lock(deps, deps.config, provider, wait=True):
        result = deps.observe(provider)
        if isinstance(result, Deferred):
            return ReconcileOutcome(
                provider, "defer", EXIT_USAGE, None, None, None, False, result.reason, None
            )
        with deps.chain.transaction() as tx:
            counter = load_counter(tx, deps)
            head = counter.head
            now = chain_time(deps.clock.now(), head.ts_utc if head is not None else None)
            if counter.problem is not None:
                return ReconcileOutcome(
                    provider, "untrusted", EXIT_HALT, None, None, None, True,
                    f"local counter cannot be trusted: {counter.problem}", None,
                )  # fmt: skip
            # The counter of the budget day (SPEC §10); the payload keeps the UTC day.
            local = _local_counter(counter, provider, budget_day(now, deps.config.day_zone), now)
            payload: dict[str, Any] = {
                "provider": provider,
                "utc_day": utc_day(now),
                "counter_micros": local,
                "billing_micros": None,
                "drift_pct": None,
                "threshold_pct": pct_text(deps.config.drift_threshold_pct),
                "blocking": False,
                "billing_api_unreachable": isinstance(result, Unreachable),
                "forced": False,
                "force_reason": None,
                "reason": None,
                "reading": reading_payload(result),
            }
            outcome = _judge(result, payload, local, deps, force_reason)
            sealed = writer.append(tx, "budget.reconcile", payload, now=now)
            fold_sealed(counter, sealed, tx.head())
            save_counter(counter, deps.states)
    return ReconcileOutcome(**{**outcome, "entry_hash": sealed.entry_hash})


def _local_counter(counter: Counter, provider: str, day: str, now: Any) -> int:
    scope = scope_state(
        counter.data["usd"], None if provider == "aggregate" else provider, 0, day, now
    )
    return scope.local_micros


def _judge(
    result: Reading | Unreachable,
    payload: dict[str, Any],
    local: int,
    deps: ReconcileDeps,
    force_reason: str | None,
) -> dict[str, Any]:
    provider = payload["provider"]
    if isinstance(result, Unreachable):
        payload["reason"] = result.reason
        return {
            "provider": provider, "status": "unreachable", "exit_code": EXIT_USAGE,
            "counter_micros": local, "billing_micros": None, "drift_pct": None,
            "blocking": False, "reason": result.reason,
        }  # fmt: skip
    billing = result.usd_used_micros
    drift = drift_pct(local, billing)
    blocking = drift > deps.config.drift_threshold_pct
    payload["billing_micros"] = billing
    payload["drift_pct"] = pct_text(drift)
    payload["blocking"] = blocking
    status, code = ("blocker", EXIT_HALT) if blocking else ("ok", EXIT_OK)
    if force_reason is not None:
        payload["forced"] = True
        payload["force_reason"] = force_reason
        payload["blocking"] = False
        status, code, blocking = "forced", EXIT_OK, False
    return {
        "provider": provider, "status": status, "exit_code": code, "counter_micros": local,
        "billing_micros": billing, "drift_pct": payload["drift_pct"], "blocking": blocking,
        "reason": force_reason,
    }  # fmt: skip


@dataclass(frozen=True, slots=True)
class RebuildOutcome:
    """What ``rebuild-state`` did."""

    entries: int
    head_hash: str | None
    previous_state: str
    entry_hash: str


def rebuild_state(deps: GateDeps, aside: "AsideStore | None" = None) -> RebuildOutcome:
    """Rebuild derived state from the verified chain and record that it was done.

    With ``aside`` (a file home) the chain is folded into it without the chain
    lock, and only the entries appended meanwhile are folded under the lock,
    where the new state takes the live one's place (``rebuild_aside``): verdicts
    are decided from the live state until then. Without it the state is folded
    under the lock.

    Raises:
        LedgerError: the chain does not verify, or a full verification found it
            broken (run ``ledger recover``).
        ChainIOError, LockTimeoutError: the chain cannot be read or locked.
    """
    writer = Writer(deps)
    writer.signer()  # fail before the lock when there is no usable key
    if aside is None:
        with deps.chain.transaction() as tx:
            _refuse_found(deps)
            previous = _previous_state(deps, tx)
            deps.states.delete()
            counter = load_counter(tx, deps)
            if counter.problem is not None:
                raise LedgerError(f"cannot rebuild derived state: {counter.problem}")
            return _seal_rebuilt(deps, writer, tx, counter, previous, [], 0, deps.states)
    with aside.holding():
        _refuse_found(deps)
        # Every row of the live index is checked here, not under the lock: only
        # this rebuild replaces it, and it is judged as it was found.
        index_sound = _index_sound(deps)
        folded = fold_aside(deps, aside)
        folded_size = folded.head.size if folded.head is not None else 0
        priced = _price_unpriced(deps, folded.data["usd"], 0, folded_size)
        with deps.chain.transaction() as tx:
            _refuse_found(deps)
            previous = _previous_state(deps, tx, check=False) if index_sound else "mismatched"
            counter = catch_up(tx, deps, aside)
            return _seal_rebuilt(deps, writer, tx, counter, previous, priced, folded_size, aside)


def _seal_rebuilt(
    deps: GateDeps,
    writer: Writer,
    tx: Any,
    counter: Counter,
    previous: str,
    priced_before: list[dict[str, Any]],
    priced_to: int,
    states: Any,
) -> RebuildOutcome:
    """Seal ``ledger.state_rebuilt`` and save the counter (swapped in when built aside)."""
    head = counter.head
    payload: dict[str, Any] = {
        "entries": counter.data["meta"]["entries"],
        "head_hash": head.entry_hash if head else None,
        "previous_state": previous,
    }
    unpriced = counter.data["usd"].get("unpriced") or {}
    # Priced before the lock as far as the fold aside went; the tail here.
    priced = [p for p in priced_before if p["entry_hash"] in unpriced]
    priced += _price_unpriced(deps, counter.data["usd"], priced_to)
    if priced:
        payload["priced"] = priced
    sealed = writer.append(tx, "ledger.state_rebuilt", payload)
    fold_sealed(counter, sealed, tx.head())
    if states is deps.states:
        save_counter(counter, deps.states)
    else:
        save_aside(counter, states)
    return RebuildOutcome(payload["entries"], payload["head_hash"], previous, sealed.entry_hash)


def _refuse_found(deps: GateDeps) -> None:
    stored = stored_finding(deps.states)
    if stored is not None:
        # Only recover clears what a full verification found (it checks the chain first).
        raise LedgerError(f"cannot rebuild derived state: {describe_finding(stored)}")


def _price_unpriced(
    deps: GateDeps, usd: dict[str, Any], start: int = 0, end: int | None = None
) -> list[dict[str, Any]]:
    """Prices for recorded calls that had none and whose model is priced now (SPEC §7).

    Their costs are sealed in the ``ledger.state_rebuilt`` envelope, so the
    counter stays a fold of the chain alone; a model still unpriced stays so.
    """
    from ledger.core.envelope import parse_line
    from ledger.core.prices import TokenCounts, applied_kinds, quote_cost_micros
    from ledger.services.gate.prices import find_price

    unpriced = usd.get("unpriced") or {}
    if not unpriced or not hasattr(deps, "price_file"):
        return []
    prices = cast("PriceDeps", deps)
    priced = []
    for raw in deps.chain.iter_lines(start, end):
        try:
            entry = parse_line(raw.rstrip(b"\n"))
        except (ValueError, LedgerError):
            continue
        record = unpriced.get(entry.entry_hash)
        tokens = entry.payload.get("tokens")
        if record is None or not record.get("model") or not isinstance(tokens, dict):
            continue
        found, _why = find_price(prices, record["provider"], record["model"])
        if found is None:
            continue
        counts = TokenCounts(**{k: int(v) for k, v in tokens.items() if k in TokenCounts._fields})
        tier = entry.payload.get("service_tier")
        micros, rates = quote_cost_micros(
            counts, found.for_service_tier(tier if isinstance(tier, str) else None) or found
        )
        priced.append(
            {
                "entry_hash": entry.entry_hash,
                "provider": record["provider"],
                "utc_day": record["utc_day"],
                "model": record["model"],
                "actual_micros": micros,
                "price_source": found.source,
                "rates": rates.as_text(applied_kinds(counts, rates)),
            }
        )
    return priced


def _index_sound(deps: GateDeps) -> bool:
    """Whether every row and link of the live derived index checks (O(rows), no lock held)."""
    check_index = getattr(deps.states, "check_index", None)
    if check_index is not None:
        try:
            check_index()
        except LedgerError:
            return False
    return True


def _previous_state(deps: GateDeps, tx: Any, *, check: bool = True) -> str:
    try:
        stored = deps.states.load()
    except LedgerError:
        return "mismatched"
    if stored is None:
        return "missing"
    if check and not _index_sound(deps):
        return "mismatched"  # a row or link of the derived index
    head = tx.head()
    if head is not None and stored.size == head.size and stored.head_hash == head.entry_hash:
        return "matching"
    if head is not None and stored.size < head.size:
        return "behind"
    return "mismatched"
