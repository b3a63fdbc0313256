"""The ``ledger report --format html`` page for a range of days: rows and a chart.

The chart draws each day's spend as a share of its own cap (the daily cap,
each provider's cap, each daily budget), so a $1 budget and a $50 cap are
read on the same 0-100 % scale. Self-contained, like the one-day page.
"""

import html
from typing import Any

from ledger.integrations.report_range_chart import range_chart_svg

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px;
       color: #1b1b1b; background: #fff; max-width: 1150px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 0.92em; }
th, td { border: 1px solid #d4d4d4; padding: 4px 10px; text-align: left; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.chart svg { width: 100%; height: auto; }
"""
_NUMBERS = ("calls", "usd", "input_tokens", "output_tokens", "cache_read_tokens",
            "cache_write_tokens", "halts")  # fmt: skip


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def range_page(doc: dict[str, Any], config: Any) -> str:
    """The page for a ``report --format json`` document of a range."""
    by = doc["by"]
    head = "".join(f"<th>{_e(name)}</th>" for name in ["day", *by, *_NUMBERS])
    body = []
    for row in doc["rows"]:
        cells = [f"<td>{_e(row['day'])}</td>"]
        cells += [f"<td>{_e(row[name] or '(none)')}</td>" for name in by]
        cells += [f'<td class="num">{_e(row[name])}</td>' for name in _NUMBERS]
        body.append(f"<tr>{''.join(cells)}</tr>")
    total = doc["totals"]
    cells = ["<td>total</td>", *(["<td></td>"] * len(by))]
    cells += [f'<td class="num">{_e(total[name])}</td>' for name in _NUMBERS]
    body.append(f"<tr>{''.join(cells)}</tr>")
    title = f"Spend from {doc['from']} to {doc['to']} ({doc['timezone']})"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{_e(title)}</h1><p>{_e(doc['entries'])} chain entries verified, head "
        f"{_e(doc['head_hash'])}</p>"
        f'<div class="chart">{range_chart_svg(doc, config)}</div>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        "</body></html>\n"
    )
