"""The USD gate: ``verdict`` (SPEC §3–4); ``usage`` is in ``services.gate.figures``.

Check and reserve are one step under the chain lock, so two processes can
never both be admitted into the same last dollar. Every verdict is sealed in
the chain; when it cannot be, the answer is still a halt. Recording the
spend that settles a reservation (``record``) is in ``services.recording``.
"""

import datetime as dt
from typing import TYPE_CHECKING, Any, NamedTuple

from ledger.core.budget_state import BudgetCheck, budget_checks
from ledger.core.budgets import CallScope
from ledger.core.config import Config
from ledger.core.output_fit import (
    OutputFit,
    fit_estimate_micros,
    output_tokens_that_fit,
    room_micros,
)
from ledger.core.seal import chain_time
from ledger.core.spend import (
    ScopeState,
    empty_usd_state,
    scope_state,
    unpriced_problem,
)
from ledger.core.timefmt import budget_day, format_ts, utc_day
from ledger.core.verdict import Decision, decide, usage_pct
from ledger.errors import (
    CanonicalizationError,
    ChainIOError,
    ClockRangeError,
    ConfigError,
    InputDataError,
    LedgerError,
    LockTimeoutError,
    SchemaValidationError,
)
from ledger.services.chain.budget_restate import restate_budgets_unlocked
from ledger.services.chain.counter import counter_problem
from ledger.services.chain.state import fold_sealed, load_counter, save_counter
from ledger.services.chain.writer import Writer
from ledger.services.gate.config_seal import seal_config_change
from ledger.services.gate.deps import GateDeps
from ledger.services.gate.figures import head_time, head_ts_text, stored_apart
from ledger.services.gate.forwarded import charge_expired_forwarded
from ledger.services.gate.spool import with_spooled

if TYPE_CHECKING:
    from ledger.core.observation import Deferred, Reading, Unreachable

    ObserverResult = Reading | Unreachable | Deferred


class VerdictOutcome(NamedTuple):
    """A decision and how it was recorded."""

    decision: Decision
    verdict_ref: str | None
    provider: str | None
    utc_day: str
    now: dt.datetime
    recording_error: str | None = None
    budget_day: str | None = None
    budgets: tuple[BudgetCheck, ...] = ()
    # The output limit the verdict lowered the call to (``None``: not lowered).
    clamped_output_tokens: int | None = None


def _daily_cap(config: Config) -> int:
    if config.daily_cap_micros is None:
        raise ConfigError("usd.daily_cap: not set; `ledger verdict` needs a daily cap")
    return config.daily_cap_micros


def _scopes(
    usd: dict[str, Any], config: Config, provider: str | None, day: str, now: dt.datetime
) -> list[ScopeState]:
    cap = _daily_cap(config)
    zone = config.day_zone
    scopes = [scope_state(usd, None, cap, day, now, zone)]
    if provider is not None and provider in config.provider_caps_micros:
        sub_cap = config.provider_caps_micros[provider]
        scopes.append(scope_state(usd, provider, sub_cap, day, now, zone))
    elif provider is not None:
        # No sub-cap, but a reconcile may have found this provider's counter
        # drifting: its calls halt counter_drift all the same (fail closed). The
        # scope carries the aggregate cap, so it never decides anything else.
        own = scope_state(usd, provider, cap, day, now, zone)
        if own.reconcile_blocking:
            scopes.append(own)
    return scopes


def _day_at(moment: dt.datetime, config: Config) -> str:
    """The budget day of ``moment`` (SPEC §10); its UTC day for a clock at the calendar's end."""
    try:
        return budget_day(moment, config.day_zone)
    except OverflowError:  # only a clock outside what the chain can hold gets here
        return utc_day(moment)


def _needs_reading(scopes: list[ScopeState], config: Config, now: dt.datetime) -> list[str]:
    providers = []
    for scope in scopes:
        pct = usage_pct(scope)
        if pct is None or pct <= config.stale_halt_pct:
            continue
        reading = scope.reading
        if reading is None or (now - reading.fetched_at).total_seconds() > config.freshness_seconds:
            providers.append(
                "aggregate" if scope.key == "aggregate" else scope.key.split(":", 1)[1]
            )
    return providers


def _budget_payload(call: CallScope, checks: list[BudgetCheck]) -> dict[str, Any]:
    """What a verdict seals for the budgets: the call's tags and key, each budget's figures.

    Left out when there is nothing to say, so a home without budgets seals
    the same payload as before budgets existed.
    """
    extra: dict[str, Any] = {}
    if call.tags:
        extra["tags"] = list(call.tags)
    if call.key is not None:
        extra["key"] = call.key
    if checks:
        extra["budgets"] = [
            {
                "name": check.figures.found.budget.name,
                "per_value": check.figures.found.per_value,
                "period": check.figures.found.budget.period,
                "period_start": check.period_texts[0],
                "period_end": check.period_texts[1],
                "used_micros": check.scope.used_micros,
                "reserved_micros": check.scope.reserved_micros,
                "cap_micros": check.scope.cap_micros,
            }
            for check in checks
        ]
    return extra


def _verdict_payload(
    decision: Decision, provider: str | None, cycle_id: str | None, agent: str | None,
    day: str, now: dt.datetime, config: Config, local_now: dt.datetime,
) -> dict[str, Any]:  # fmt: skip
    scope = decision.deciding
    reservation = None
    if decision.admits:
        # ``now`` is the time this verdict is sealed with, the clock every fold
        # judges expiry by: the reservation lives its full TTL on that clock.
        expires = now + dt.timedelta(seconds=config.reservation_ttl_seconds)
        reservation = {"micros": decision.estimate_micros, "expires_at": format_ts(expires)}
    projected = decision.projected_pct
    return {
        "verdict": decision.verdict.value,
        "provider": provider,
        "cycle_id": cycle_id,
        "agent": agent,
        "utc_day": day,
        "estimated_micros": decision.estimate_micros,
        "usd_used_micros": scope.used_micros,
        "usd_reserved_micros": scope.reserved_micros,
        "cap_micros": scope.cap_micros,
        "deciding_cap": scope.key,
        "usage_pct": None if projected is None else f"{float(projected):.4f}",
        "uncertainty_reason": decision.reason.value if decision.reason else None,
        "diagnostic": decision.diagnostic,
        "local_time": format_ts(local_now),
        "reservation": reservation,
    }


def _unrecorded(
    scopes: list[ScopeState], estimate: int, config: Config, now: dt.datetime,
    provider: str | None, why: str,
) -> VerdictOutcome:  # fmt: skip
    decision = decide(scopes, estimate, config, now, counter_problem=f"verdict not recorded: {why}")
    return VerdictOutcome(
        decision, None, provider, utc_day(now), now, why, budget_day=_day_at(now, config)
    )


def check_verdict(
    deps: GateDeps,
    estimate_micros: int,
    provider: str | None = None,
    cycle_id: str | None = None,
    agent: str | None = None,
    details: dict[str, Any] | None = None,
    *,
    tags: tuple[str, ...] = (),
    key: str | None = None,
    fit: OutputFit | None = None,
    forwarded: bool = False,
) -> VerdictOutcome:
    """Decide and record one pre-call check, reserving the estimate when admitted.

    With ``fit``, a call whose estimate does not fit what is left is decided
    at the largest output limit that does (at least ``fit.min_output``), in
    the same step as the check and the reservation, so two calls lowered at
    once can never both take the same room; the outcome names that limit.
    ``forwarded`` marks a reservation whose request is sent as soon as it is
    admitted (the gateway's): if the process dies before recording it, the
    reservation is charged at its estimate when it expires, never released.

    ``details`` (the model, its ``price_source`` and token counts of a verdict
    priced from tokens) are sealed in the verdict's payload as they are.
    ``tags`` and ``key`` (a gateway key's name) scope the call for budgets, as
    its provider, agent, model and cycle id (its session) do.

    A verdict that cannot be recorded (torn tail, lock timeout, unusable key,
    a clock or deadline outside what the chain can hold) is still a halt.

    Raises:
        ConfigError: the configuration is invalid or has no daily cap.
    """
    config = deps.config
    _daily_cap(config)  # a config error is reported before anything is touched
    model = (details or {}).get("model")
    call = CallScope(provider, agent, model, cycle_id, key, tags, (details or {}).get("client"))
    try:
        now = deps.clock.now()
    except ClockRangeError as exc:
        # SPEC §3: a clock outside what the chain can hold is a verdict that
        # cannot be recorded, and still one printed halt.
        day = _day_at(exc.moment, config)
        empty = _scopes(empty_usd_state(), config, provider, day, exc.moment)
        return _unrecorded(empty, estimate_micros, config, exc.moment, provider, str(exc))
    writer = Writer(deps)
    try:
        writer.signer()
    except (InputDataError, ChainIOError) as exc:
        return _unrecorded(_known_scopes(deps, provider, now), estimate_micros, config, now,
                           provider, str(exc))  # fmt: skip
    if config.budgets:
        # A changed [[budgets]] is counted afresh here, not under the lock (``budget_restate``).
        restate_budgets_unlocked(deps)
    try:
        outcome = _gate_once(
            deps,
            writer,
            estimate_micros,
            call,
            refresh=[],
            details=details,
            fit=fit,
            forwarded=forwarded,
        )
        if isinstance(outcome, VerdictOutcome):
            return outcome
        results = [deps.observe(name) for name in outcome]
        final = _gate_once(
            deps, writer, estimate_micros, call, refresh=results, details=details, fit=fit,
            forwarded=forwarded,
        )  # fmt: skip
        assert isinstance(final, VerdictOutcome)  # noqa: S101 - refresh given: always decides
    except LockTimeoutError as exc:
        # Waiting again for the busy lock just to print figures would double the delay.
        empty = _scopes(empty_usd_state(), config, provider, _day_at(now, config), now)
        return _unrecorded(empty, estimate_micros, config, now, provider, str(exc))
    except (ChainIOError, InputDataError) as exc:
        # InputDataError: the writer key is unusable at the sealing time (revoked,
        # not yet valid), found under the lock.
        return _unrecorded(_known_scopes(deps, provider, now), estimate_micros, config, now,
                           provider, str(exc))  # fmt: skip
    except (CanonicalizationError, SchemaValidationError) as exc:
        # A figure the chain cannot hold (a day's spend past 2^53 - 1 micro-USD):
        # nothing was appended, and the decision is still printed.
        why = f"a figure outside what the chain can hold ({exc})"
        return _unrecorded(_known_scopes(deps, provider, now), estimate_micros, config, now,
                           provider, why)  # fmt: skip
    except (ClockRangeError, OverflowError) as exc:
        # A deadline (a reservation's expiry) or a sealing time past what the
        # chain can hold: nothing was appended. Folding again could overflow
        # the same way, so the figures are those of an empty day.
        why = f"a time outside what the chain can hold ({exc})"
        empty = _scopes(empty_usd_state(), config, provider, _day_at(now, config), now)
        return _unrecorded(empty, estimate_micros, config, now, provider, why)
    return final


def _known_scopes(deps: GateDeps, provider: str | None, now: dt.datetime) -> list[ScopeState]:
    """The best figures available for a halt that could not be recorded.

    When reading fails too, or the counter cannot be trusted, the figures are
    those of an empty day.
    """
    usd = empty_usd_state()
    try:
        with deps.chain.read_transaction() as tx:
            counter = load_counter(tx, deps)
        if counter.problem is None:
            usd = counter.data["usd"]
    except LedgerError:
        pass
    return _scopes(usd, deps.config, provider, _day_at(now, deps.config), now)


def _gate_once(
    deps: GateDeps,
    writer: Writer,
    estimate_micros: int,
    call: CallScope,
    refresh: list["ObserverResult"],
    details: dict[str, Any] | None = None,
    fit: OutputFit | None = None,
    *,
    forwarded: bool = False,
) -> VerdictOutcome | list[str]:
    config = deps.config
    provider = call.provider
    if refresh:
        from ledger.core.observation import Deferred, reading_payload
    with deps.chain.transaction() as tx:
        local_now = deps.clock.now()
        counter = load_counter(tx, deps, stored_apart(config, call))
        now = chain_time(local_now, head_ts_text(counter))
        problem = counter_problem(counter, config)
        for result in refresh:
            if isinstance(result, Deferred):
                continue
            payload = {**reading_payload(result), "source": "verdict"}
            sealed = writer.append(tx, "budget.observation", payload, now=now)
            if problem is None:
                fold_sealed(counter, sealed, tx.head())
        if problem is None:
            problem = seal_config_change(deps, writer, tx, counter, now)
        if problem is None:
            charge_expired_forwarded(writer, tx, counter, now)
        day = budget_day(now, config.day_zone)
        scopes = _scopes(with_spooled(deps, counter.data, now), config, provider, day, now)
        # SPEC §7: spend of today whose price is unknown halts like a damaged counter.
        halting = problem or unpriced_problem(counter.data["usd"], day)
        if halting is None and not refresh and config.observer_command is not None:
            wanted = _needs_reading(scopes, config, now)
            if wanted:
                return wanted
        checks = []
        if config.budgets:
            checks = budget_checks(
                counter.data.get("budgets"), config.budgets, call, now, config.day_zone,
                config.warn_pct,
            )  # fmt: skip
        clamped = None
        rooms = [room_micros(s) for s in [*scopes, *(c.scope for c in checks)]] if fit else []
        # A call that fits as it is keeps its limit: the search would find just that.
        if fit is not None and any(estimate_micros >= room for room in rooms):
            fitting = output_tokens_that_fit(rooms, fit)
            if fitting is not None and fitting < fit.requested:
                clamped = fitting
                estimate_micros = fit_estimate_micros(fit, fitting)
        decision = decide(
            scopes, estimate_micros, config, now,
            head_ts=head_time(counter), counter_problem=halting, local_now=local_now,
            budget_scopes=[(check.scope, check.warn_pct) for check in checks],
        )  # fmt: skip
        payload = _verdict_payload(
            decision, provider, call.session, call.agent, utc_day(now), now, config, local_now
        )
        payload.update(details or {})
        if clamped is not None:
            payload["max_output_tokens"] = clamped  # the limit the call is sent with
        payload.update(_budget_payload(call, checks))
        if forwarded and isinstance(payload.get("reservation"), dict):
            payload["reservation"]["forwarded"] = True
        sealed = writer.append(tx, decision.verdict.event_type, payload, now=now)
        if problem is None:
            fold_sealed(counter, sealed, tx.head())
            save_counter(counter, deps.states)
    return VerdictOutcome(
        decision, sealed.entry_hash, provider, utc_day(now), now, budget_day=day,
        budgets=tuple(checks), clamped_output_tokens=clamped,
    )  # fmt: skip
