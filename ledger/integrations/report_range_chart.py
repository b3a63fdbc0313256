"""The range page's chart: each day's spend as a share of its own cap or budget.

A line per scope — the daily cap, each provider's cap, each budget without
``per`` (its spend so far in its period; rolling windows are left out: they
have no day) — drawn in percent of that scope's cap, so every line is read on
the same scale whatever the size of its cap. Money stays integer micro-USD
until it is drawn.
"""

import datetime as dt
import io
from typing import Any

import matplotlib as mpl

mpl.use("Agg")
from matplotlib.figure import Figure


def _period_start(period: str, day: dt.date) -> dt.date:
    if period == "week":
        return day - dt.timedelta(days=day.weekday())
    if period == "month":
        return day.replace(day=1)
    return day


def scope_lines(doc: dict[str, Any], config: Any) -> list[tuple[str, list[float | None]]]:
    """``(label, percent of its cap per day)`` for each scope with a cap.

    ``doc["scopes"]`` maps a scope name (``aggregate``, ``provider:P``,
    ``budget:NAME``) to its spend per day (micro-USD).
    """
    from ledger.core.units import cents_text

    days = doc["days"]
    lines: list[tuple[str, list[float | None]]] = []
    caps: list[tuple[str, str, int | None, str]] = [
        ("aggregate", "daily cap", config.daily_cap_micros, "day")
    ]
    caps += [(f"provider:{name}", f"{name} cap", cap, "day")
             for name, cap in sorted(config.provider_caps_micros.items())]  # fmt: skip
    caps += [(f"budget:{b.name}", f"budget {b.name} ({b.period})", b.cap_micros, b.period)
             for b in config.budgets if b.per is None and b.window_seconds is None]  # fmt: skip
    for scope, label, cap, period in caps:
        if cap is None:
            continue
        spent = doc["scopes"].get(scope, {})
        points: list[float | None] = []
        running, since = 0, None
        for day in days:
            date = dt.date.fromisoformat(day)
            start = _period_start(period, date)
            if start != since:
                running, since = 0, start
            running += spent.get(day, 0)
            points.append(None if cap == 0 else 100 * running / cap)
        lines.append((f"{label} {cents_text(cap)}", points))
    return lines


def range_chart_svg(doc: dict[str, Any], config: Any) -> str:
    """The chart as one inline ``<svg>`` element."""
    figure = Figure(figsize=(10, 4.2))
    axes = figure.add_subplot()
    days = doc["days"]
    for label, points in scope_lines(doc, config):
        axes.plot(range(len(days)), [p if p is not None else float("nan") for p in points],
                  marker="o", markersize=3, label=label)  # fmt: skip
    axes.axhline(100, color="#d62728", linestyle="--", linewidth=1, label="100 % of the cap")
    step = max(1, len(days) // 10)
    axes.set_xticks(range(0, len(days), step), [days[i][5:] for i in range(0, len(days), step)])
    axes.set_ylabel("% of its own cap (budget: so far in its period)")
    axes.set_title(f"Spend against each cap, {doc['from']} to {doc['to']}")
    axes.legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    buffer = io.StringIO()
    with mpl.rc_context({"svg.hashsalt": "ledger-report", "svg.fonttype": "path"}):
        figure.savefig(
            buffer,
            format="svg",
            metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
        )
    text = buffer.getvalue()
    svg = text[text.index("<svg") :]
    return svg.replace("<svg", '<svg role="img" aria-label="spend against each cap"', 1)
