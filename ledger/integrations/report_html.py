"""The ``ledger report --html`` page: one self-contained file, chart drawn by matplotlib.

This module and its chart (``report_chart``) are the only ones that import
matplotlib (the ``spend-ledger[report]`` extra), and only ``ledger report
--html`` imports them. The chart is rendered with the Agg backend to SVG and
inlined, its text drawn as paths; the styles are inline; nothing refers to a
network address, so the page opens anywhere.

Input is the document ``ledger report --json`` prints; money stays integer
micro-USD until it is drawn.
"""

import html
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

from ledger.core.timefmt import parse_ts
from ledger.core.units import cents_text, pct_text
from ledger.integrations.report_chart import chart_svg

_MONEY_COLUMNS = (
    "cap_micros", "counter_micros", "billing_micros", "used_micros", "reserved_micros",
    "remaining_micros",
)  # fmt: skip
_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px;
       color: #1b1b1b; background: #fff; max-width: 1150px; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h3 { font-size: 1em; margin: 1em 0 0.3em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0; font-size: 0.92em; }
th, td { border: 1px solid #d4d4d4; padding: 4px 10px; text-align: left; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { background: #e8f5e9; border: 1px solid #66bb6a; padding: 8px 12px; }
.halt { background: #fdecea; border: 1px solid #e53935; padding: 8px 12px; }
.chart svg { width: 100%; height: auto; }
.none { color: #777; font-style: italic; }
td.bar { width: 240px; }
td.bar div { background: #4e79a7; height: 0.9em; min-width: 1px; }
"""


def _e(value: object) -> str:
    return html.escape("-" if value is None else str(value))


def _money(micros: int | None) -> str:
    """Money as ``ledger status`` shows it: to the cent; what is left never negative."""
    return "-" if micros is None else cents_text(micros)


def _left(micros: int | None) -> str:
    if micros is None:
        return "-"
    if micros >= 0:
        return cents_text(micros, round_down=True)
    return f"$0.00 (over by {cents_text(-micros)})"


def _table(head: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset()) -> str:
    if not rows:
        return '<p class="none">none</p>'
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{_e(c)}</td>' if i in numeric else f"<td>{_e(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def _when(ts_utc: str) -> str:
    return parse_ts(ts_utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _scope_row(scope: dict[str, Any]) -> list[str]:
    pct = scope["usage_pct"]
    return [
        scope["scope"],
        *(_money(scope[key]) for key in _MONEY_COLUMNS[:-1]),
        _left(scope["remaining_micros"]),
        pct_text(pct),
        str(scope["records"]),
    ]


def _reconcile_row(item: dict[str, Any], clock: Callable[[str], str]) -> list[str]:
    if item["billing_api_unreachable"]:
        result = "billing unreachable"
    elif item["forced"]:
        result = f"forced, re-based {_money(item['rebase_micros'])}: {item['force_reason']}"
    else:
        result = "blocker" if item["blocking"] else "ok"
    drift = item["drift_pct"]
    return [
        clock(item["ts_utc"]),
        item["provider"],
        _money(item["counter_micros"]),
        _money(item["billing_micros"]),
        pct_text(drift),
        pct_text(item["threshold_pct"]),
        result,
    ]


def _budget_section(budgets: list[dict[str, Any]]) -> list[str]:
    """The budgets that applied on the day; nothing when none did."""
    if not budgets:
        return []
    rows = [
        [b["name"] + ("" if b["per_value"] is None else f"[{b['per_value']}]"), b["period"],
         f"{_when(b['period_start'])} to {_when(b['period_end'])}", _money(b["used_micros"]),
         _money(b["reserved_micros"]), _money(b["cap_micros"]),
         pct_text(b["usage_pct"]), str(b["halts"])]
        for b in budgets
    ]  # fmt: skip
    head = ["budget", "period", "window", "used", "reserved", "cap", "usage", "halts"]
    return ["<h2>Budgets</h2>", _table(head, rows, frozenset({3, 4, 5, 6, 7}))]


def _sections(document: dict[str, Any]) -> list[str]:
    zone = ZoneInfo(document["timezone"])

    def clock(ts_utc: str) -> str:
        return parse_ts(ts_utc).astimezone(zone).strftime("%H:%M:%S")

    reading_rows = [
        [clock(r["time"]), r["scope"], _money(r["usd_micros"]), r["source"]]
        for r in document.get("bill_readings") or []
    ]
    verdicts = document["verdicts"]
    verdict_rows = [
        [item["verdict"], item["uncertainty_reason"] or "-", str(item["count"])]
        for item in verdicts["by_reason"]
    ]
    halt_rows = [
        [clock(h["ts_utc"]), h["verdict"], h["uncertainty_reason"] or "-", h["provider"] or "-",
         h["deciding_cap"] or "-"]
        for h in document["halts"]
    ]  # fmt: skip
    scope_head = ["scope", "cap", "counter", "billing", "used", "reserved", "remaining", "usage",
                  "records"]  # fmt: skip
    reconcile_head = ["time", "scope", "counter", "billing", "drift", "threshold", "result"]
    return [
        "<h2>Spend against the caps</h2>",
        _table(scope_head, [_scope_row(s) for s in document["scopes"]], frozenset(range(1, 9))),
        *_breakdown_section(document.get("breakdown")),
        f"<h2>Verdicts ({verdicts['total']})</h2>",
        _table(["verdict", "uncertainty reason", "count"], verdict_rows, frozenset({2})),
        "<h2>Halts</h2>",
        _table(["time", "verdict", "reason", "provider", "deciding cap"], halt_rows),
        "<h2>Bill readings</h2>",
        _table(["time", "scope", "bill", "source"], reading_rows, frozenset({2})),
        "<h2>Reconciles</h2>",
        _table(
            reconcile_head,
            [_reconcile_row(item, clock) for item in document["reconciles"]],
            frozenset({2, 3, 4, 5}),
        ),
        *_agent_sections(document.get("agents")),
    ]


def _breakdown_section(breakdown: dict[str, Any] | None) -> list[str]:
    """The day's recorded spend by model, session or agent, with a bar for each share."""
    if breakdown is None:
        return []
    title = f"<h2>Spend by {_e(breakdown['by'])} (recorded calls)</h2>"
    if not breakdown["rows"]:
        return [title, '<p class="none">none</p>']
    body = "".join(
        f'<tr><td>{_e(row["key"])}</td><td class="num">{row["calls"]}</td>'
        f'<td class="num">{_e(_money(row["usd_micros"]))}</td>'
        f'<td class="num">{_e(pct_text(row["share_pct"]))}</td>'
        f'<td class="bar"><div style="width: {float(row["share_pct"] or 0):.1f}%"></div></td></tr>'
        for row in breakdown["rows"]
    )
    head = "".join(f"<th>{h}</th>" for h in (_e(breakdown["by"]), "calls", "spend", "share", ""))
    return [title, f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"]


def _agent_sections(agents: dict[str, Any] | None) -> list[str]:
    if agents is None:
        return []
    convoys = [[c["convoy"], f"{c['total_consumed']}/{c['max_allowed']}", f"{c['percent_used']}%",
                str(c["reserved_tokens"]), str(c["agent_max_tokens"])]
               for c in agents["convoys"]]  # fmt: skip
    flows = [[f["workflow"], f"{f['effective_total']}/{f['total']} ({f['total_pct']}%)",
              f"{f['effective_phase']}/{f['phase']} ({f['phase_pct']}%)", f["phase_name"],
              f["verdict"]] for f in agents["workflows"]]  # fmt: skip
    tools = [[a["agent"], a["role"], a["message"], str(a["exempt_calls"]),
              str(a["refused_calls"])] for a in agents["agents"]]  # fmt: skip
    countdown = agents["time"]
    parts = [
        "<h2>Agent budgets (now)</h2>",
        "<h3>Tokens (convoys)</h3>",
        _table(["convoy", "used/max", "used %", "reserved", "agent max"], convoys),
        "<h3>Turns (workflows)</h3>",
        _table(["workflow", "total", "phase", "phase name", "verdict"], flows),
        "<h3>Tool calls (agents)</h3>",
        _table(["agent", "role", "budget", "exempt", "refused"], tools),
        "<h3>Time</h3>",
        '<p class="none">none</p>'
        if countdown is None
        else f"<p>{_e(countdown['message'])} (deadline {_e(countdown['deadline'])}, "
        f"{_e(countdown['source'])})</p>",
    ]
    if agents.get("diagnostic"):
        parts.append(f'<p class="halt">agent counters cannot be trusted: '
                     f"{_e(agents['diagnostic'])}</p>")  # fmt: skip
    return parts


def render_html(document: dict[str, Any]) -> str:
    """The whole page for one ``ledger report`` document."""
    counter = document["counter"]
    banner = (
        '<p class="ok">Counter trusted: the chain verifies and folds.</p>'
        if counter["trusted"]
        else '<p class="halt">Counter NOT trusted: verdicts halt '
        f"{_e(counter['uncertainty_reason'])}: {_e(counter['diagnostic'])}</p>"
    )
    day = _e(document["budget_day"])
    body = [
        f"<h1>ledger report: budget day {day}</h1>",
        (
            f'<p class="meta">time zone {_e(document["timezone"])}; the day runs from '
            f"{_e(_when(document['day_start']))} to {_e(_when(document['day_end']))}; generated "
            f"{_e(_when(document['generated_at']))}; {_e(document['entries'])} chain entries "
            "verified</p>"
        ),
        banner,
        f'<div class="chart">{chart_svg(document)}</div>',
        *_sections(document),
        *_budget_section(document.get("budgets") or []),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>ledger report {day}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
