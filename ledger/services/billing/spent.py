"""``warn`` alerts on what was spent, never on a verdict's projection.

A scope warns when its used spend (recorded, plus open reservations) crosses
its threshold.

A ``warn-90`` verdict projects the call's worst-case estimate onto the scope, so
it fires long before the money is spent (a Claude Code call estimated at $0.56
made a "near the cap" alert fire at $0.34 of $1.00). Here the daemon reads each
scope's figures as ``usage`` and ``budgets`` do, writing nothing: the aggregate
and each provider cap at ``usd.warn_pct``, each budget at each of its
``alert_pcts`` (else its ``warn_pct``, else ``usd.warn_pct``). Each threshold
alerts once per period (the key holds the period and the threshold).

While the counter cannot be trusted the figures are unknown, and nothing is
said about them (the ``broken`` incident is).
"""

from fractions import Fraction
from typing import Any

from ledger.core.alerts import Alert, period_words
from ledger.core.spend import ScopeState
from ledger.core.timefmt import format_ts
from ledger.core.units import usd_text
from ledger.core.verdict_kind import Uncertainty
from ledger.services.gate.budget_views import budget_rows
from ledger.services.gate.deps import GateDeps
from ledger.services.gate.figures import usage


def _pct_text(pct: Fraction) -> str:
    return f"{float(pct):g}%"


def _alert(
    scope: str, period: str, words: str, pct: Fraction, figures: tuple[int, int, int], at: str
) -> Alert:
    used, reserved, cap = figures
    text = (
        f"ledger: spend reached {_pct_text(pct)} of the cap for {scope} {words}; "
        f"{usd_text(used)} used + {usd_text(reserved)} reserved of cap {usd_text(cap)}"
    )
    return Alert("warn", scope, f"{period}@{pct}", None, at, text)


def _crossed(figures: tuple[int, int, int], thresholds: tuple[Fraction, ...]) -> list[Fraction]:
    used, reserved, cap = figures
    if cap <= 0:
        return []
    spent = Fraction(100 * (max(used, 0) + reserved), cap)
    return [pct for pct in thresholds if spent >= pct]


def _scope_alerts(scope: ScopeState, name: str, day: str, pct: Fraction, at: str) -> list[Alert]:
    figures = (scope.used_micros, scope.reserved_micros, scope.cap_micros)
    return [
        _alert(name, day, f"on {day}", found, figures, at) for found in _crossed(figures, (pct,))
    ]


def spend_alerts(deps: GateDeps) -> list[Alert]:
    """The ``warn`` alerts the scopes' used spend calls for now (sent once per key)."""
    config = deps.config
    outcome = usage(deps)
    if outcome.uncertainty is Uncertainty.COUNTER_INCONSISTENT:
        return []  # unknown figures: nothing to say about them
    day = outcome.budget_day or outcome.utc_day
    at = format_ts(outcome.now)
    found: list[Alert] = []
    if config.daily_cap_micros is not None:
        found += _scope_alerts(outcome.aggregate, "aggregate", day, config.warn_pct, at)
    for provider, cap in sorted(config.provider_caps_micros.items()):
        scope = usage(deps, provider).provider_scope
        if scope is not None and cap is not None:
            found += _scope_alerts(scope, f"provider:{provider}", day, config.warn_pct, at)
    if config.budgets:
        found += _budget_alerts(deps, day, at)
    return found


def _budget_alerts(deps: GateDeps, day: str, at: str) -> list[Alert]:
    config = deps.config
    document = budget_rows(deps)
    if document.get("diagnostic"):
        return []
    by_name = {budget.name: budget for budget in config.budgets}
    found: list[Alert] = []
    for row in document["budgets"]:
        budget = by_name.get(row["name"])
        if budget is None:
            continue
        thresholds = budget.alert_pcts or (budget.warn_pct or config.warn_pct,)
        value = row.get("per_value")
        scope = f"budget:{budget.name}" + (f"[{value}]" if value is not None else "")
        figures = (int(row["used_micros"]), int(row["reserved_micros"]), int(row["cap_micros"]))
        payload: dict[str, Any] = {"budget_day": day, "budgets": [{**row, "period": budget.period}]}
        words = period_words(payload, scope, config.day_zone)
        start = str(row["period_start"])
        found.extend(
            _alert(scope, start, words, pct, figures, at) for pct in _crossed(figures, thresholds)
        )
    return found
