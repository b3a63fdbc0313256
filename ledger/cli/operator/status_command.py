"""``ledger status``: every active budget — a table for people, JSON with ``--json``.

Shows today's USD figures (``ledger usage``), convoy token budgets, workflow
turn budgets, agents' tool-call budgets and the countdown in force
(``LEDGER_BUDGET_END`` over ``ledger time start``). Writes nothing. Exit 0; 78
for a config error (including a malformed ``LEDGER_BUDGET_END``).
"""

import sys
from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_json, text_table
from ledger.services.views.status import agent_view, collect

__all__ = ["agent_view", "collect", "render", "status"]


def _left_text(remaining_micros: int) -> str:
    """What is left of a cap, never negative: ``$0.00 (over by $0.05)`` past the cap."""
    from ledger.core.units import cents_text

    if remaining_micros >= 0:
        return cents_text(remaining_micros, round_down=True)
    return f"$0.00 (over by {cents_text(-remaining_micros)})"


def _money_row(scope: str, period: str, figures: dict[str, Any], note: str) -> list[str]:
    """A row of the caps table from exact micro-USD figures: to the cent, % to one decimal."""
    from fractions import Fraction

    from ledger.core.units import cents_text, pct_for_people

    cap, used, reserved = (figures[k] for k in ("cap", "used", "reserved"))
    if used is None or reserved is None:
        shown = "not set" if cap is None else cents_text(cap)
        return [scope, period, shown, "unknown", "unknown", "unknown", "unknown", note]
    if cap is None:
        return [scope, period, "not set", cents_text(used), cents_text(reserved), "-", "-", note]
    pct = Fraction(100 * (used + reserved), cap) if cap else None
    return [
        scope, period, cents_text(cap), cents_text(used), cents_text(reserved),
        pct_for_people(pct), _left_text(cap - used - reserved), note,
    ]  # fmt: skip


def _budget_micros(budget: dict[str, Any], key: str) -> int | None:
    """A budget's figure in micro-USD: its ``<key>_micros`` if given, else its USD value."""
    from ledger.core.units import usd_to_micros

    if budget.get(f"{key}_micros") is not None:
        return int(budget[f"{key}_micros"])
    value = budget.get(key)
    return None if value is None else usd_to_micros(value)


def _usd_lines(document: dict[str, Any]) -> list[str]:
    usd = document["usd"]
    rows = [["SCOPE", "PERIOD", "CAP", "USED", "RESERVED", "USED%", "LEFT", "NOTE"]]
    for cap in usd["caps"]:
        reason = cap["uncertainty_reason"]
        figures = {
            "cap": cap["cap_micros"],
            "used": cap["usd_used_micros"],
            "reserved": cap["usd_reserved_micros"],
        }
        note = f"halt-uncertainty: {reason}" if reason else ""
        if cap["cap_micros"] is None and not reason:
            note = "no daily cap configured (usd.daily_cap)"
        rows.append(_money_row(cap["scope"], cap["period"], figures, note))
    # Budgets (named caps over a period for matching calls) are rows of the same
    # table, after the day's caps, once the figures carry them.
    unknown = not usd.get("figures_known", True)
    for budget in document.get("budgets") or []:
        per = f"[{budget['per_value']}]" if budget.get("per_value") else ""
        figures = {key: _budget_micros(budget, key) for key in ("cap", "used", "reserved")}
        note = "halt-uncertainty: counter_inconsistent" if unknown else ""
        rows.append(_money_row(f"budget:{budget['name']}{per}", budget["period"], figures, note))
    lines = [f"USD, budget day {usd['budget_day']}:", *text_table(rows)]
    count = usd.get("unsettled_calls") or 0
    if count:
        from ledger.core.units import cents_text

        amount = cents_text(int(usd["usd_unsettled_micros"]))
        calls = "call" if count == 1 else "calls"
        lines.append(
            f"unsettled: {count} forwarded {calls} not recorded yet, {amount} reserved "
            "(in flight, or its gateway stopped; charged at its estimate when it expires)"
        )
    return lines


def render(document: dict[str, Any]) -> str:
    """The status as text for people."""
    from ledger.services.chain.init_options import billing_line

    lines = [*_usd_lines(document), billing_line(document["billing"]), *agent_lines(document)]
    return "\n".join(lines) + "\n"


def agent_lines(document: dict[str, Any]) -> list[str]:
    """The agent budgets of an ``agent_view`` as lines of text."""
    lines: list[str] = []
    if document["convoys"]:
        rows = [["CONVOY", "USED/MAX", "USED%", "RESERVED", "AGENT MAX", "STATE"]]
        for convoy in document["convoys"]:
            state = (
                "exhausted" if convoy["budget_exhausted"]
                else "warning" if convoy["warning_active"] else "ok"
            )  # fmt: skip
            rows.append([
                convoy["convoy"], f"{convoy['total_consumed']}/{convoy['max_allowed']}",
                f"{convoy['percent_used']}%", str(convoy["reserved_tokens"]),
                str(convoy["agent_max_tokens"]), state,
            ])  # fmt: skip
        lines += ["Token budgets (convoys):", *text_table(rows)]
    if document["workflows"]:
        rows = [["WORKFLOW", "TOTAL", "PHASE", "PHASE NAME", "VERDICT"]]
        for flow in document["workflows"]:
            rows.append([
                flow["workflow"],
                f"{flow['effective_total']}/{flow['total']} ({flow['total_pct']}%)",
                f"{flow['effective_phase']}/{flow['phase']} ({flow['phase_pct']}%)",
                flow["phase_name"], flow["verdict"],
            ])  # fmt: skip
        lines += ["Turn budgets (workflows):", *text_table(rows)]
    if document["agents"]:
        rows = [["AGENT", "ROLE", "BUDGET", "EXEMPT", "REFUSED"]]
        for agent in document["agents"]:
            rows.append([
                agent["agent"], agent["role"], agent["message"],
                str(agent["exempt_calls"]), str(agent["refused_calls"]),
            ])  # fmt: skip
        lines += ["Tool-call budgets (agents):", *text_table(rows)]
    countdown = document["time"]
    if countdown is not None:
        lines.append(f"Time ({countdown['source']}, deadline {countdown['deadline']}):")
        lines.append(f"  {countdown['message']}")
    if document["diagnostic"]:
        lines.append(f"WARNING: agent budget counters cannot be trusted: {document['diagnostic']}")
    return lines


def status(
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object instead of a table.")
    ] = False,
) -> None:
    """Show every active budget: USD today, convoy tokens, turns, tool calls, time.

    Example: ledger --home ./.ledger status --json
    """

    def body() -> int:
        document = collect(_runtime())
        if as_json:
            print_json(document)
        else:
            sys.stdout.write(render(document))
        return 0

    code = guarded(body)
    if code:
        raise typer.Exit(code)


def register(app: Any) -> None:
    """Add ``status`` to the typer app."""
    app.command("status")(status)
