"""The chart of ``ledger report --html``: cumulative spend against the caps, as inline SVG.

Drawn by matplotlib (the ``spend-ledger[report]`` extra) with the Agg backend,
its text as paths. The time axis spans the day's active period: from a little
before its first entry to a little after its last (or now, for today); a day
without entries shows the whole budget day. Ticks fall on round wall-clock
times in the report's time zone, spaced for the span shown.
"""

import datetime as dt
import io
import re
from typing import Any
from zoneinfo import ZoneInfo

import matplotlib as mpl

mpl.use("Agg")

from matplotlib.figure import Figure

from ledger.core.timefmt import parse_ts
from ledger.core.units import MICROS_PER_USD, cents_text

_SVG_OPEN = re.compile(r"<svg\b[^>]*>")
_SIZE_ATTR = re.compile(r'\s(?:width|height)="[^"]*"')
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_BUDGET_COLOURS = ("#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5")
_STEPS_MINUTES = (5, 10, 15, 30, 60, 120, 180, 360)
_MAX_TICKS = 10
_PAD_HOURS = 0.25  # the margin around a short active period
_MIN_SPAN_HOURS = 1.0  # a single entry still shows an hour around it
_WHOLE_DAY_SHARE = 0.75  # an active period longer than this share of the day shows all of it


def _usd(micros: int) -> float:
    return micros / MICROS_PER_USD  # drawing only; never summed


def _hours(ts_utc: str, start: dt.datetime) -> float:
    return (parse_ts(ts_utc) - start).total_seconds() / 3600


def _value_at(series: list[list[Any]], ts_utc: str) -> int:
    value = 0
    for when, micros in series:
        if when > ts_utc:
            break
        value = micros
    return int(value)


def _name(scope: str) -> str:
    return "all providers" if scope == "aggregate" else scope.split(":", 1)[1]


def active_span(document: dict[str, Any]) -> tuple[float, float]:
    """The hours after the day's start that the chart shows, left and right."""
    start, end = parse_ts(document["day_start"]), parse_ts(document["day_end"])
    length = (end - start).total_seconds() / 3600
    now = parse_ts(document["generated_at"])
    moments = [
        _hours(when, start)
        for scope in document["scopes"]
        for when, _ in scope["series"][1:]  # the first point is the day's start, at 0
    ]
    moments += [_hours(document[key], start) for key in ("first_entry_ts", "last_entry_ts")
                if document.get(key)]  # fmt: skip
    if not moments:
        return 0.0, length
    first, last = min(moments), max(moments)
    if start <= now < end:
        last = max(last, _hours(document["generated_at"], start))
    pad = max(_PAD_HOURS, (last - first) * 0.04)
    left, right = max(first - pad, 0.0), last + pad
    if right - left < _MIN_SPAN_HOURS:
        middle = (left + right) / 2
        left, right = max(middle - _MIN_SPAN_HOURS / 2, 0.0), middle + _MIN_SPAN_HOURS / 2
    right = min(right, max(length, last))
    if right - left >= _WHOLE_DAY_SHARE * length:
        return 0.0, max(length, right)
    return left, right


def ticks(
    start: dt.datetime, zone: ZoneInfo, left: float, right: float
) -> tuple[list[float], list[str]]:
    """Round wall-clock times in ``zone`` between ``left`` and ``right`` hours after ``start``."""
    minutes = (right - left) * 60
    step = next((s for s in _STEPS_MINUTES if minutes / s <= _MAX_TICKS), _STEPS_MINUTES[-1])
    local = (start + dt.timedelta(hours=left)).astimezone(zone).replace(tzinfo=None)
    since_midnight = local.hour * 60 + local.minute
    wall = local.replace(hour=0, minute=0, second=0, microsecond=0) + dt.timedelta(
        minutes=since_midnight - since_midnight % step
    )
    day = start.astimezone(zone).date()
    places: list[float] = []
    labels: list[str] = []
    while True:
        moment = wall.replace(tzinfo=zone).astimezone(dt.UTC)
        place = (moment - start).total_seconds() / 3600
        if place > right + 1e-9:
            return places, labels
        if place >= left - 1e-9 and (not places or place > places[-1]):
            shown = moment.astimezone(zone)
            label = shown.strftime("%H:%M")
            if shown.date() != day:
                label += shown.strftime("\n%d %b")
            places.append(place)
            labels.append(label)
        wall += dt.timedelta(minutes=step)


def _plot_scopes(axes: Any, scopes: list[dict[str, Any]], start: dt.datetime, stop: float) -> int:
    """Each scope's cumulative line and its cap; returns the highest figure drawn (micros)."""
    top = 0
    colours = iter(_COLOURS * 8)
    for scope in scopes:
        aggregate = scope["scope"] == "aggregate"
        name = _name(scope["scope"])
        colour = "#111111" if aggregate else next(colours)
        scope["_colour"] = colour
        series = scope["series"]
        xs = [_hours(when, start) for when, _ in series] + [stop]
        ys = [_usd(micros) for _, micros in series] + [_usd(series[-1][1])]
        top = max(top, *(micros for _, micros in series))
        axes.step(
            xs, ys, where="post", color=colour, linewidth=2.6 if aggregate else 1.8,
            label=f"{name}: {cents_text(series[-1][1])}", zorder=3,
        )  # fmt: skip
        cap = scope["cap_micros"]
        if cap is not None:
            top = max(top, cap)
            label = f"daily cap {cents_text(cap)}" if aggregate else f"{name} cap {cents_text(cap)}"
            axes.axhline(
                _usd(cap), color="#d62728" if aggregate else colour, linestyle="--",
                linewidth=1.6, label=label, zorder=2,
            )  # fmt: skip
    return top


def _plot_budgets(axes: Any, budgets: list[dict[str, Any]], start: dt.datetime, stop: float) -> int:
    """Each shown budget's used spend through the day and its cap; returns the highest."""
    top = 0
    colours = iter(_BUDGET_COLOURS * 8)
    for budget in budgets:
        series = budget.get("series") or []
        if not series:
            continue
        colour = next(colours)
        budget["_colour"] = colour
        name = budget["scope"].removeprefix("budget:")
        xs = [_hours(when, start) for when, _ in series] + [stop]
        ys = [_usd(micros) for _, micros in series] + [_usd(series[-1][1])]
        top = max(top, *(micros for _, micros in series))
        axes.step(
            xs, ys, where="post", color=colour, linewidth=1.6, linestyle="-.",
            label=f"budget {name}: {cents_text(series[-1][1])}", zorder=3,
        )  # fmt: skip
        cap = budget["cap_micros"]
        top = max(top, cap)
        axes.axhline(
            _usd(cap), color=colour, linestyle=":", linewidth=1.4,
            label=f"budget {name} cap {cents_text(cap)} ({budget['period']})", zorder=2,
        )  # fmt: skip
    return top


def _plot_readings(axes: Any, document: dict[str, Any], start: dt.datetime) -> int:
    """The bill readings, one marker per reading in its scope's colour; returns the highest."""
    colour_of = {scope["scope"]: scope.get("_colour", "#555555") for scope in document["scopes"]}
    by_scope: dict[str, list[dict[str, Any]]] = {}
    for reading in document.get("bill_readings") or []:
        by_scope.setdefault(reading["scope"], []).append(reading)
    top = 0
    for scope, readings in by_scope.items():
        top = max(top, *(r["usd_micros"] for r in readings))
        axes.scatter(
            [_hours(r["time"], start) for r in readings],
            [_usd(r["usd_micros"]) for r in readings],
            marker="D", s=42, facecolors="white", edgecolors=colour_of.get(scope, "#555555"),
            linewidths=1.8, zorder=5,
            label=f"{_name(scope)} bill: {cents_text(readings[-1]['usd_micros'])}",
        )  # fmt: skip
    return top


def halt_points(document: dict[str, Any]) -> list[tuple[str, str, int]]:
    """Each halt as ``(time, scope, spend)``: on the line of the scope that decided it.

    A cap's halt sits on its cap's line; a budget's on that budget's line (the
    chart draws the budgets the report shows); anything else on the aggregate.
    """
    series_of = {scope["scope"]: scope["series"] for scope in document["scopes"]}
    series_of.update(
        {b["scope"]: b["series"] for b in document.get("budgets") or [] if b.get("series")}
    )
    points = []
    for halt in document["halts"]:
        scope = halt.get("deciding_cap") or "aggregate"
        if scope not in series_of:
            scope = "aggregate"
        points.append((halt["ts_utc"], scope, _value_at(series_of[scope], halt["ts_utc"])))
    return points


def _plot_halts(axes: Any, document: dict[str, Any], start: dt.datetime) -> None:
    """Halts, each marked on the line of the scope that decided it."""
    points = halt_points(document)
    if not points:
        return
    axes.scatter(
        [_hours(when, start) for when, _, _ in points], [_usd(micros) for _, _, micros in points],
        marker="X", s=70, color="#d62728", zorder=4, label=f"halts ({len(points)})",
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


def _span_text(hours: float) -> str:
    minutes = round(hours * 60)
    whole, rest = divmod(minutes, 60)
    return f"{whole} h {rest:02d} min" if whole else f"{rest} min"


def chart_svg(document: dict[str, Any]) -> str:
    """Cumulative spend per provider, in aggregate and per budget against the caps, as SVG."""
    zone = ZoneInfo(document["timezone"])
    start, end = parse_ts(document["day_start"]), parse_ts(document["day_end"])
    now = parse_ts(document["generated_at"])
    length = (end - start).total_seconds() / 3600
    left, right = active_span(document)
    # The lines run on to now (today), or to the chart's right edge (a day past).
    now_at = _hours(document["generated_at"], start)
    stop = right if now >= end else min(max(now_at, left), right)
    scopes = [dict(scope) for scope in document["scopes"]]
    figure = Figure(figsize=(11, 5.6), layout="constrained")
    axes = figure.add_subplot()
    top = _plot_scopes(axes, scopes, start, stop)
    budgets = [dict(budget) for budget in document.get("budgets") or []]
    top = max(top, _plot_budgets(axes, budgets, start, stop))
    top = max(top, _plot_readings(axes, {**document, "scopes": scopes}, start))
    _plot_halts(axes, document, start)
    if start <= now < end and left <= now_at <= right:
        axes.axvline(now_at, color="#777777", linestyle=":", linewidth=1.2, label="now")
    places, labels = ticks(start, zone, left, right)
    axes.set_xticks(places, labels)
    axes.set_xlim(left, right)
    axes.set_ylim(0, _usd(top) * 1.12 if top else 1.0)
    axes.yaxis.set_major_formatter("${x:,.2f}")
    shown = "the whole day" if (left, right) == (0.0, length) else _span_text(right - left)
    axes.set_xlabel(
        f"time of day ({document['timezone']}); showing {shown} of a {length:g} h budget day"
    )
    axes.set_ylabel("cumulative spend (USD)")
    axes.set_title(f"Spend against the caps, budget day {document['budget_day']}")
    axes.grid(visible=True, color="#e5e5e5", zorder=0)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _svg_text(figure)
