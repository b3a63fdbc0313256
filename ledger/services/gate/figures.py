"""Today's figures without deciding anything: ``usage`` (SPEC §3), and what it shares with the gate.

What a verdict for $0 more would say, read under the chain's read lock; it
writes nothing. The gate (``services.gate.gate``) decides and seals verdicts
from the same figures.
"""

import datetime as dt
from typing import TYPE_CHECKING, Any, NamedTuple

from ledger.core.budget_state import BudgetCheck, budget_checks
from ledger.core.budgets import Applicable, CallScope, applicable
from ledger.core.config import Config
from ledger.core.seal import chain_time
from ledger.core.spend import ScopeState, scope_state, unpriced_problem, unsettled
from ledger.core.state import empty_state
from ledger.core.timefmt import budget_day, parse_ts, utc_day
from ledger.core.verdict import Uncertainty, Verdict, decide
from ledger.errors import StoreUnreachableError
from ledger.services.chain.counter import Counter, counter_problem
from ledger.services.chain.state import load_counter
from ledger.services.gate.spool import with_spooled

if TYPE_CHECKING:
    from ledger.services.gate.deps import GateDeps


def head_ts_text(counter: Counter) -> str | None:
    """The chain head's timestamp text, if the counter has a head."""
    return counter.head.ts_utc if counter.head is not None else None


def head_time(counter: Counter) -> dt.datetime | None:
    """The chain head's time, if it has one that parses."""
    try:
        return parse_ts(counter.head.ts_utc) if counter.head is not None else None
    except ValueError:
        return None


def stored_apart(config: Config, call: CallScope) -> list[Applicable]:
    """The budgets with ``per`` that apply to ``call``: their counters are read while loading."""
    per_value = [budget for budget in config.budgets if budget.per is not None]
    return applicable(per_value, call) if per_value else []


class UsageOutcome(NamedTuple):
    """A read-only view of today's spend."""

    aggregate: ScopeState
    provider_scope: ScopeState | None
    provider: str | None
    provider_cap_micros: int | None
    daily_cap_micros: int | None
    utc_day: str
    now: dt.datetime
    uncertainty: Uncertainty | None
    diagnostic: str | None
    budget_day: str | None = None
    verdict: Verdict | None = None  # what a verdict for $0 more would say
    # The scope that verdict is decided by, and the budgets that apply to ``call``.
    deciding: ScopeState | None = None
    budgets: tuple[BudgetCheck, ...] = ()
    # The budgets' derived state the figures were read from (``None`` when unknown).
    budget_state: dict[str, Any] | None = None
    # Forwarded calls not recorded yet: how many, and their estimates (micro-USD).
    unsettled: tuple[int, int] = (0, 0)
    # The derived state's ``meta`` (entries folded, newest snapshot); ``None`` when untrusted.
    chain_meta: dict[str, Any] | None = None


def usage(
    deps: "GateDeps", provider: str | None = None, call: CallScope | None = None
) -> UsageOutcome:
    """Today's figures for the aggregate and, if asked, one provider; writes nothing.

    With ``call``, the verdict for $0 more also checks every budget that applies
    to that call, as a verdict for it would (the same matching and figures).

    Raises:
        ConfigError: the configuration is invalid.
        LockTimeoutError: the chain lock stayed busy.
    """
    config = deps.config
    try:
        with deps.chain.read_transaction() as tx:
            local_now = deps.clock.now()
            touching = stored_apart(config, call) if call is not None else []
            counter = load_counter(tx, deps, touching)
    except StoreUnreachableError as exc:
        # SPEC §8: a store that cannot be reached is an untrusted counter, as a
        # chain that cannot be read is; spooled spend still shows.
        local_now = deps.clock.now()
        counter = Counter(empty_state(), None, str(exc))
    now = chain_time(local_now, head_ts_text(counter))
    day, zone = budget_day(now, config.day_zone), config.day_zone
    usd = with_spooled(deps, counter.data, now)
    aggregate = scope_state(usd, None, config.daily_cap_micros or 0, day, now, zone)
    provider_cap = config.provider_caps_micros.get(provider) if provider else None
    provider_scope = None
    if provider is not None:
        provider_scope = scope_state(usd, provider, provider_cap or 0, day, now, zone)
    scopes = [aggregate]
    if provider_scope is not None and provider_cap is not None:
        scopes.append(provider_scope)
    problem = counter_problem(counter, config) or unpriced_problem(usd, day)
    checks: list[BudgetCheck] = []
    state = counter.data.get("budgets")
    if call is not None and config.budgets:
        checks = budget_checks(state, config.budgets, call, now, zone, config.warn_pct)
    decision = decide(
        scopes, 0, config, now, head_ts=head_time(counter),
        counter_problem=problem, local_now=local_now,
        budget_scopes=[(check.scope, check.warn_pct) for check in checks],
    )  # fmt: skip
    reason = decision.reason
    return UsageOutcome(
        aggregate, provider_scope, provider, provider_cap, config.daily_cap_micros,
        utc_day(now), now, reason, decision.diagnostic, budget_day=day,
        verdict=decision.verdict, deciding=decision.deciding, budgets=tuple(checks),
        budget_state=state if checks else None, unsettled=unsettled(usd),
        chain_meta=counter.data["meta"] if counter.problem is None else None,
    )  # fmt: skip
