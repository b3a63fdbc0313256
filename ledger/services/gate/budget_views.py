"""Budgets as the per-call commands and the views show them.

The checks of a call's budget scope (``--tag``, ``--key``) and the figures a
verdict, ``ledger budgets``, ``usage --budget`` and ``status`` print.
"""

import re
from typing import Any

from ledger.core.ids import printable
from ledger.core.spend import ScopeState
from ledger.core.timefmt import format_ts
from ledger.core.units import MICROS_PER_USD
from ledger.errors import UsageError

TAG_RE = re.compile(r"^[A-Za-z0-9._:/@+-]{1,64}$")
TAGS_MAX = 32
KEY_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


def usd(micros: int | None) -> float | None:
    """Micro-USD as USD for the JSON document (display only).

    The same float ``micros_to_usd`` gives (an int quotient is correctly
    rounded), without building a Fraction for each of a verdict's figures.
    """
    return None if micros is None else micros / MICROS_PER_USD


def tag_list(values: object) -> tuple[str, ...]:
    """Checked ``--tag`` values, in order, each once.

    Raises:
        UsageError: a tag that does not match ``^[A-Za-z0-9._:/@+-]{1,64}$``, or
            more than 32 of them.
    """
    if values is None:
        return ()
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise UsageError("--tag: give a list of tags")
    for value in values:
        if not isinstance(value, str) or not TAG_RE.fullmatch(value):
            raise UsageError(f"--tag: {value!r} must match ^[A-Za-z0-9._:/@+-]{{1,64}}$")
    unique = tuple(dict.fromkeys(values))
    if len(unique) > TAGS_MAX:
        raise UsageError(f"--tag: at most {TAGS_MAX} tags")
    return unique


def key_name(value: object) -> str | None:
    """A checked gateway key name (``--key``).

    Raises:
        UsageError: not a name matching ``^[a-z][a-z0-9_-]{0,63}$``.
    """
    if value is not None and (not isinstance(value, str) or not KEY_NAME_RE.fullmatch(value)):
        raise UsageError("--key: must be a key name matching ^[a-z][a-z0-9_-]{0,63}$")
    return value


def budgets_document(checks: Any, estimate_micros: int) -> list[dict[str, Any]]:
    """Each applicable budget's figures as the verdict prints them (USD, projected %)."""
    shown = []
    for check in checks:
        figures, scope = check.figures, check.scope
        entry: dict[str, Any] = {
            "name": figures.found.budget.name,
            "period": figures.found.budget.period,
            "period_start": check.period_texts[0],
            "period_end": check.period_texts[1],
            "used": usd(scope.used_micros),
            "reserved": usd(scope.reserved_micros),
            "cap": usd(scope.cap_micros),
            "usage_pct": _projected_pct(scope, estimate_micros),
        }
        if figures.found.budget.per is not None:
            entry["per_value"] = figures.found.per_value
        shown.append(entry)
    return shown


def _projected_pct(scope: ScopeState, estimate_micros: int) -> float | None:
    """``usage_pct`` as the document shows it, to 4 places.

    An int quotient is correctly rounded, as the float of the exact fraction
    is: the same figure, without building a Fraction per budget.
    """
    if scope.cap_micros == 0:
        return None
    projected = 100 * (scope.used_micros + scope.reserved_micros + estimate_micros)
    return round(projected / scope.cap_micros, 4)


def budget_rows(deps: Any, name: str | None = None) -> dict[str, Any]:
    """Every budget (or the one named) with its current period's figures; writes nothing.

    A budget with ``per`` has a row for each value that has spend or a
    reservation in its current period; without any, one row with no value.
    Figures are those a verdict would use now, without an estimate.

    Raises:
        UsageError: ``name`` is not a defined budget.
        ConfigError: the configuration is invalid.
    """
    from ledger.core.budget_calendar import period_bounds
    from ledger.core.budget_counters import all_counters, counters_damage
    from ledger.core.budget_state import BudgetFigures, figures
    from ledger.core.budgets import Applicable
    from ledger.core.seal import chain_time
    from ledger.services.chain.counter import counter_problem
    from ledger.services.chain.state import load_counter

    config = deps.config
    budgets = [b for b in config.budgets if name is None or b.name == name]
    if name is not None and not budgets:
        raise UsageError(f"--budget: no budget named {name!r} in ledger.toml")
    with deps.chain.read_transaction() as tx:
        local_now = deps.clock.now()
        counter = load_counter(tx, deps)
        problem = counter_problem(counter, config)
        state = counter.data.get("budgets") if problem is None else None
        # Every value's counter is read under the lock: a writer may rewrite a
        # counter file, and remove the one the loaded state names, once it is let in.
        listed = {
            budget.name: all_counters(state, budget)
            for budget in budgets
            if budget.per is not None and state is not None
        }
    head = counter.head.ts_utc if counter.head is not None else None
    now = chain_time(local_now, head)
    rows = []
    for budget in budgets:
        shown = []
        for value in listed.get(budget.name, []):  # values only where a state was read
            seen = figures(state or {}, Applicable(budget, value), now, config.day_zone)
            # A calendar period's table keeps last period's values until a call
            # of this period names one: only those with figures now are rows.
            if seen.used_micros or seen.reserved_micros:
                shown.append(_row(budget, value, seen))
        if not shown:
            found = Applicable(budget, None)
            if state is not None and budget.per is None:
                seen = figures(state, found, now, config.day_zone)
            else:
                start, end = period_bounds(budget, now, config.day_zone)
                seen = BudgetFigures(found, start, end, 0, 0, None)
            shown.append(_row(budget, None, seen))
        rows.extend(shown)
    damage = counters_damage(state)
    if damage is not None:
        # A counter store found damage while listing: no figure of it is trusted.
        return budget_rows_untrusted(budgets, now, config.day_zone, damage[0])
    return {"budgets": rows, "now": format_ts(now), "diagnostic": problem}


def budget_rows_untrusted(budgets: Any, now: Any, zone: Any, problem: str) -> dict[str, Any]:
    """Budget rows when the counters cannot be trusted: one empty row each, and why."""
    from ledger.core.budget_calendar import period_bounds
    from ledger.core.budget_state import BudgetFigures
    from ledger.core.budgets import Applicable

    rows = []
    for budget in budgets:
        start, end = period_bounds(budget, now, zone)
        rows.append(
            _row(budget, None, BudgetFigures(Applicable(budget, None), start, end, 0, 0, None))
        )
    return {
        "budgets": rows,
        "now": format_ts(now),
        "diagnostic": f"{problem}; run `ledger rebuild-state`",
    }


def _row(budget: Any, value: str | None, seen: Any) -> dict[str, Any]:
    used = max(seen.used_micros, 0)
    cap = budget.cap_for(value)
    pct = None
    if cap:
        pct = round(100 * (used + seen.reserved_micros) / cap, 4)
    return {
        "name": budget.name,
        "period": budget.period,
        "match": dict(budget.match),
        "per": budget.per,
        "per_value": value,
        "period_start": format_ts(seen.period_start),
        "period_end": format_ts(seen.period_end),
        "used": usd(used),
        "reserved": usd(seen.reserved_micros),
        "cap": usd(cap),
        "remaining": usd(max(cap - used - seen.reserved_micros, 0)),
        "usage_pct": pct,
        "used_micros": used,
        "reserved_micros": seen.reserved_micros,
        "cap_micros": cap,
    }


def budget_table(document: dict[str, Any]) -> list[str]:
    """The budgets as lines of text for people (money to the cent, never negative)."""
    from ledger.core.budget_calendar import bounds_for_people

    rows = [["BUDGET", "PERIOD", "FROM", "TO", "USED", "RESERVED", "CAP", "%", "LEFT"]]
    for row in document["budgets"]:
        per = row["per_value"]
        label = row["name"] + (f"[{printable(per)}]" if per is not None else "")
        rows.append([
            label, row["period"],
            *bounds_for_people(row["period"], row["period_start"], row["period_end"]),
            f"${row['used']:.2f}", f"${row['reserved']:.2f}", f"${row['cap']:.2f}",
            "-" if row["usage_pct"] is None else f"{row['usage_pct']:.1f}",
            f"${row['remaining']:.2f}",
        ])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]  # fmt: skip
    if document["diagnostic"]:
        lines.append(f"WARNING: counters cannot be trusted: {document['diagnostic']}")
    return lines
