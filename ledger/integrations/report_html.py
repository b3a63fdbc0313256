"""The ``ledger report --html`` page: one self-contained file, chart drawn by matplotlib.

The only module that imports matplotlib (the ``spend-ledger[report]`` extra), and
only ``ledger report --html`` imports it. The chart is rendered with the Agg
backend to SVG and inlined, its text drawn as paths; the styles are inline;
nothing refers to a network address, so the page opens anywhere.

Input is the document ``ledger report --json`` prints; money stays integer
micro-USD until it is drawn.
"""

import datetime as dt
import html
import io
import re
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import matplotlib as mpl

mpl.use("Agg")

from matplotlib.figure import Figure

from ledger.core.timefmt import parse_ts
from ledger.core.units import MICROS_PER_USD, usd_text

_SVG_OPEN = re.compile(r"<svg\b[^>]*>")
_SIZE_ATTR = re.compile(r'\s(?:width|height)="[^"]*"')
_MONEY_COLUMNS = (
    "cap_micros", "counter_micros", "billing_micros", "used_micros", "reserved_micros",
    "remaining_micros",
)  # fmt: skip
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
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
"""


def _e(value: object) -> str:
    return html.escape("-" if value is None else str(value))


def _money(micros: int | None) -> str:
    return "-" if micros is None else usd_text(micros)


def _usd(micros: int) -> float:
    return micros / MICROS_PER_USD  # drawing only; never summed


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


def _hours(ts_utc: str, start: dt.datetime) -> float:
    return (parse_ts(ts_utc) - start).total_seconds() / 3600


def _value_at(series: list[list[Any]], ts_utc: str) -> int:
    value = 0
    for when, micros in series:
        if when > ts_utc:
            break
        value = micros
    return int(value)


def _ticks(start: dt.datetime, zone: ZoneInfo) -> tuple[list[float], list[str]]:
    """Every third hour of the wall clock in ``zone``, placed at its real time in the day."""
    midnight = dt.datetime.combine(start.astimezone(zone).date(), dt.time())
    places, labels = [], []
    for hour in range(0, 25, 3):
        moment = (midnight + dt.timedelta(hours=hour)).replace(tzinfo=zone).astimezone(dt.UTC)
        places.append((moment - start).total_seconds() / 3600)
        labels.append(moment.astimezone(zone).strftime("%H:%M"))
    return places, labels


def _plot_scopes(axes: Any, scopes: list[dict[str, Any]], start: dt.datetime, stop: float) -> int:
    """Each scope's cumulative line and its cap; returns the highest figure drawn (micros)."""
    top = 0
    colours = iter(_COLOURS * 8)
    for scope in scopes:
        aggregate = scope["scope"] == "aggregate"
        name = "all providers" if aggregate else scope["scope"].split(":", 1)[1]
        colour = "#111111" if aggregate else next(colours)
        series = scope["series"]
        xs = [_hours(when, start) for when, _ in series] + [stop]
        ys = [_usd(micros) for _, micros in series] + [_usd(series[-1][1])]
        top = max(top, *(micros for _, micros in series))
        axes.step(
            xs, ys, where="post", color=colour, linewidth=2.6 if aggregate else 1.8,
            label=f"{name}: {_money(series[-1][1])}", zorder=3,
        )  # fmt: skip
        cap = scope["cap_micros"]
        if cap is not None:
            top = max(top, cap)
            label = f"daily cap {_money(cap)}" if aggregate else f"{name} cap {_money(cap)}"
            axes.axhline(
                _usd(cap), color="#d62728" if aggregate else colour, linestyle="--",
                linewidth=1.6, label=label, zorder=2,
            )  # fmt: skip
    return top


def _plot_halts(axes: Any, document: dict[str, Any], start: dt.datetime) -> None:
    """Halts, each marked on the line of the cap that decided it."""
    halts = document["halts"]
    if not halts:
        return
    series_of = {scope["scope"]: scope["series"] for scope in document["scopes"]}
    heights = [
        _usd(
            _value_at(series_of.get(halt["deciding_cap"]) or series_of["aggregate"], halt["ts_utc"])
        )
        for halt in halts
    ]
    axes.scatter(
        [_hours(halt["ts_utc"], start) for halt in halts], heights, marker="X", s=70,
        color="#d62728", zorder=4, label=f"halts ({len(halts)})",
    )  # fmt: skip


def _svg_text(figure: Figure) -> str:
    """The figure as one ``<svg>`` element that scales with the page."""
    buffer = io.StringIO()
    with mpl.rc_context({"svg.hashsalt": "ledger-report", "svg.fonttype": "path"}):
        figure.savefig(
            buffer, format="svg",
            metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
        )  # fmt: skip
    text = buffer.getvalue()
    svg = text[text.index("<svg") :]
    opening = _SVG_OPEN.match(svg)
    if opening is None:  # pragma: no cover - matplotlib always writes one <svg> element
        raise ValueError("no <svg> element in matplotlib's output")
    tag = _SIZE_ATTR.sub("", opening.group(0)).replace(
        "<svg", '<svg role="img" aria-label="cumulative spend against the caps"', 1
    )
    return tag + svg[opening.end() :]


def chart_svg(document: dict[str, Any]) -> str:
    """Cumulative spend per provider and in aggregate against the caps, as inline SVG."""
    zone = ZoneInfo(document["timezone"])
    start, end = parse_ts(document["day_start"]), parse_ts(document["day_end"])
    now = parse_ts(document["generated_at"])
    length = (end - start).total_seconds() / 3600
    last = max(
        (_hours(when, start) for scope in document["scopes"] for when, _ in scope["series"]),
        default=0.0,
    )
    right = max(length, last)
    # The lines run on to now (today), or to the day's end (a day past).
    now_at = _hours(document["generated_at"], start)
    stop = right if now >= end else min(max(now_at, 0.0, last), right)
    figure = Figure(figsize=(11, 5.6), layout="constrained")
    axes = figure.add_subplot()
    top = _plot_scopes(axes, document["scopes"], start, stop)
    _plot_halts(axes, document, start)
    if start <= now < end:
        axes.axvline(now_at, color="#777777", linestyle=":", linewidth=1.2, label="now")
    places, labels = _ticks(start, zone)
    axes.set_xticks(places, labels)
    axes.set_xlim(0, right)
    axes.set_ylim(0, _usd(top) * 1.12 if top else 1.0)
    axes.yaxis.set_major_formatter("${x:,.2f}")
    axes.set_xlabel(f"time of day ({document['timezone']}); this budget day lasts {length:g} h")
    axes.set_ylabel("cumulative spend (USD)")
    axes.set_title(f"Spend against the caps, budget day {document['budget_day']}")
    axes.grid(visible=True, color="#e5e5e5", zorder=0)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _svg_text(figure)


def _scope_row(scope: dict[str, Any]) -> list[str]:
    pct = scope["usage_pct"]
    return [
        scope["scope"],
        *(_money(scope[key]) for key in _MONEY_COLUMNS),
        "-" if pct is None else f"{pct}%",
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
        "-" if drift is None else f"{drift}%",
        f"{item['threshold_pct']}%",
        result,
    ]


def _sections(document: dict[str, Any]) -> list[str]:
    zone = ZoneInfo(document["timezone"])

    def clock(ts_utc: str) -> str:
        return parse_ts(ts_utc).astimezone(zone).strftime("%H:%M:%S")

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
        f"<h2>Verdicts ({verdicts['total']})</h2>",
        _table(["verdict", "uncertainty reason", "count"], verdict_rows, frozenset({2})),
        "<h2>Halts</h2>",
        _table(["time", "verdict", "reason", "provider", "deciding cap"], halt_rows),
        "<h2>Reconciles</h2>",
        _table(
            reconcile_head,
            [_reconcile_row(item, clock) for item in document["reconciles"]],
            frozenset({2, 3, 4, 5}),
        ),
        *_agent_sections(document.get("agents")),
    ]


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
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>ledger report {day}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
