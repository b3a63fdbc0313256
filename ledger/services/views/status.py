"""Every cap, budget and agent budget as one document: what ``ledger status --json`` prints.

Read-only. The console's overview shows the same document, so both front
doors answer the same figures.
"""

from typing import Any


def _cap_row(scope: str, cap: int | None, outcome: Any, scope_state: Any) -> dict[str, Any]:
    """One cap's figures: exact micro-USD, USD for display, and the % of the cap in use."""
    from ledger.core.units import micros_to_usd, pct_for_display, percent

    used, reserved = scope_state.used_micros, scope_state.reserved_micros
    remaining = None if cap is None else cap - used - reserved
    return {
        "scope": scope,
        "period": "day",
        "cap_usd": None if cap is None else micros_to_usd(cap),
        "usd_used": micros_to_usd(used),
        "usd_reserved": micros_to_usd(reserved),
        "usd_remaining": None if remaining is None else micros_to_usd(remaining),
        "usage_pct": pct_for_display(percent(used + reserved, cap) if cap else None),
        "cap_micros": cap,
        "usd_used_micros": used,
        "usd_reserved_micros": reserved,
        "usd_remaining_micros": remaining,
        "uncertainty_reason": outcome.uncertainty.value if outcome.uncertainty else None,
    }


def _usd_view(runtime: Any) -> dict[str, Any]:
    from ledger.core.units import micros_to_usd, pct_for_display, percent
    from ledger.services.gate.figures import usage

    outcome = usage(runtime)
    scope = outcome.aggregate
    cap = outcome.daily_cap_micros
    used, reserved = scope.used_micros, scope.reserved_micros
    pct = percent(used + reserved, cap) if cap else None
    caps = [_cap_row("aggregate", cap, outcome, scope)]
    for provider in sorted(runtime.config.provider_caps_micros):
        seen = usage(runtime, provider)
        caps.append(
            _cap_row(f"provider:{provider}", seen.provider_cap_micros, seen, seen.provider_scope)
        )
    return {
        "configured": cap is not None,
        "utc_day": outcome.utc_day,
        "budget_day": outcome.budget_day,
        "daily_cap_usd": None if cap is None else micros_to_usd(cap),
        "usd_used": micros_to_usd(used),
        "usd_reserved": micros_to_usd(reserved),
        "usd_remaining": None if cap is None else micros_to_usd(cap - used - reserved),
        "usage_pct": pct_for_display(pct),
        "uncertainty_reason": outcome.uncertainty.value if outcome.uncertainty else None,
        "diagnostic": outcome.diagnostic,
        "caps": caps,
        # Calls forwarded by a gateway and not recorded yet (in flight, or their
        # gateway died): each is charged at its estimate when it expires.
        "unsettled_calls": outcome.unsettled[0],
        "usd_unsettled": micros_to_usd(outcome.unsettled[1]),
        "usd_unsettled_micros": outcome.unsettled[1],
    }


def agent_view(runtime: Any) -> dict[str, Any]:
    """The agent budgets (convoys, workflows, agents, time) as ``status --json`` shows them."""
    from ledger.core.agents.time import BUDGET_END_VARIABLE, parse_budget_end
    from ledger.errors import ConfigError
    from ledger.services.agents.status import agent_status

    end_text = runtime.environ.get(BUDGET_END_VARIABLE)
    budget_end = None
    if end_text:
        try:
            budget_end = parse_budget_end(end_text)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
    return agent_status(runtime, budget_end)


_UNKNOWN_USD = ("usd_used", "usd_reserved", "usd_remaining", "usage_pct")
_UNKNOWN_CAP = (*_UNKNOWN_USD, "usd_used_micros", "usd_reserved_micros", "usd_remaining_micros")
_UNKNOWN_BUDGET = ("used", "reserved", "remaining", "usage_pct", "used_micros", "reserved_micros")


def _mark_unknown(document: dict[str, Any]) -> None:
    """Blank every figure the untrusted counter gave: unknown, never a reassuring $0.00."""
    usd = document["usd"]
    usd["figures_known"] = False
    usd.update(dict.fromkeys(_UNKNOWN_USD))
    for cap in usd["caps"]:
        cap.update(dict.fromkeys(_UNKNOWN_CAP))
    for budget in document.get("budgets") or []:
        budget.update(dict.fromkeys(_UNKNOWN_BUDGET))


def collect(runtime: Any) -> dict[str, Any]:
    """Every budget's figures as one JSON-able document.

    While the counter cannot be trusted (a torn or broken chain, a state that
    does not match it), every money figure is ``null``: the gate halts, and a
    row of $0.00 would say there is room.
    """
    from ledger.services.chain.init_options import billing_source
    from ledger.services.gate.budget_views import budget_rows

    document = {
        "usd": _usd_view(runtime),
        "billing": billing_source(runtime.config),
        **agent_view(runtime),
    }
    document["usd"]["figures_known"] = True
    if runtime.config.budgets:
        document["budgets"] = budget_rows(runtime)["budgets"]
    if document["usd"]["uncertainty_reason"] == "counter_inconsistent":
        _mark_unknown(document)
    return document
