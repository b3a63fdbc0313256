"""``ledger report [--day D] [--json] [--html F]``: one budget day (SPEC §10).

A table for people, one JSON object with ``--json``, and with ``--html F`` a
self-contained page with a chart (matplotlib, the ``spend-ledger[report]`` extra,
imported by ``--html`` only). Exit codes: 0 reported; 1 the chain does not
verify or disagrees with its newest checkpoint, or ``--html`` without the
extra; 2 a malformed ``--day``; 65 an unusable trust store; 74 the chain or
the page cannot be read or written; 75 lock timeout; 78 config error.
"""

import datetime as dt
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ledger.cli.output import guarded, print_json
from ledger.errors import LedgerError, UsageError

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_FIRST_DAY, _LAST_DAY = dt.date(1, 1, 2), dt.date(9999, 12, 29)


def parse_day(text: str) -> str:
    """A ``--day`` value as ``YYYY-MM-DD``.

    Raises:
        UsageError: not a calendar day in that form.
    """
    try:
        if not _DAY.fullmatch(text):
            raise ValueError(text)
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--day: {text!r} is not a day (YYYY-MM-DD)") from None
    if not _FIRST_DAY <= day <= _LAST_DAY:  # the day after must still be in the calendar
        raise UsageError(f"--day: {text!r} is outside {_FIRST_DAY} to {_LAST_DAY}")
    return day.isoformat()


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  "
        + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _money(micros: int | None) -> str:
    from ledger.core.units import usd_text

    return "-" if micros is None else usd_text(micros)


def _clock(ts_utc: str, zone: dt.tzinfo) -> str:
    from ledger.core.timefmt import parse_ts

    return parse_ts(ts_utc).astimezone(zone).strftime("%H:%M:%S")


def _reconcile_result(item: dict[str, Any]) -> str:
    if item["billing_api_unreachable"]:
        return "billing unreachable"
    if item["forced"]:
        return f"forced, re-based {_money(item['rebase_micros'])}: {item['force_reason']}"
    return "blocker" if item["blocking"] else "ok"


def render_text(document: dict[str, Any], zone: dt.tzinfo) -> str:
    """The report as tables for people."""
    from ledger.cli.status_command import agent_lines

    counter = document["counter"]
    out = [
        (
            f"Budget day {document['budget_day']} ({document['timezone']}: "
            f"{document['day_start']} to {document['day_end']}); "
            f"{document['entries']} chain entries verified"
        ),
        "Counter: trusted"
        if counter["trusted"]
        else f"Counter: NOT TRUSTED, verdicts halt counter_inconsistent: {counter['diagnostic']}",
        "",
        "Spend against the caps:",
    ]
    rows = [["SCOPE", "CAP", "COUNTER", "BILLING", "USED", "RESERVED", "REMAINING", "USAGE",
             "RECORDS"]]  # fmt: skip
    for scope in document["scopes"]:
        pct = scope["usage_pct"]
        rows.append([
            scope["scope"], _money(scope["cap_micros"]), _money(scope["counter_micros"]),
            _money(scope["billing_micros"]), _money(scope["used_micros"]),
            _money(scope["reserved_micros"]), _money(scope["remaining_micros"]),
            "-" if pct is None else f"{pct}%", str(scope["records"]),
        ])  # fmt: skip
    out += _table(rows)
    if document["unpriced_calls"]:
        out.append(f"  {document['unpriced_calls']} recorded call(s) without a price")
    verdicts = document["verdicts"]
    outcomes = ", ".join(f"{name} {count}" for name, count in verdicts["by_outcome"].items())
    out += ["", f"Verdicts: {verdicts['total']}" + (f" ({outcomes})" if outcomes else "")]
    if verdicts["by_reason"]:
        rows = [["VERDICT", "UNCERTAINTY REASON", "COUNT"]]
        rows += [[item["verdict"], item["uncertainty_reason"] or "-", str(item["count"])]
                 for item in verdicts["by_reason"]]  # fmt: skip
        out += _table(rows)
    out += ["", f"Reconciles: {len(document['reconciles'])}"]
    if document["reconciles"]:
        rows = [["TIME", "SCOPE", "COUNTER", "BILLING", "DRIFT", "THRESHOLD", "RESULT"]]
        for item in document["reconciles"]:
            drift = item["drift_pct"]
            rows.append([
                _clock(item["ts_utc"], zone), item["provider"], _money(item["counter_micros"]),
                _money(item["billing_micros"]), "-" if drift is None else f"{drift}%",
                f"{item['threshold_pct']}%", _reconcile_result(item),
            ])  # fmt: skip
        out += _table(rows)
    agents = document.get("agents")
    if agents is not None:
        lines = agent_lines(agents)
        out += ["", "Agent budgets (now):", *(lines or ["  none"])]
    return "\n".join(out) + "\n"


def _html_renderer() -> Callable[[dict[str, Any]], str]:
    """The page renderer, found before any work is done.

    Raises:
        LedgerError: the report extra (matplotlib) is not installed.
    """
    try:
        from ledger.integrations.report_html import render_html
    except ImportError as exc:
        raise LedgerError(
            "report --html needs matplotlib: pip install 'spend-ledger[report]'"
        ) from exc
    return render_html


def report_command(
    day: Annotated[
        str | None,
        typer.Option("--day", metavar="D", help="The budget day, YYYY-MM-DD (default: today)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of tables.")
    ] = False,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="F",
            help="Also write a self-contained HTML page with a chart of spend against the "
            "caps to F (needs the report extra).",
        ),
    ] = None,
) -> None:
    """Report one budget day: spend against the caps, verdicts, reconciles, agent budgets.

    The chain is verified and folded as the gate folds it; a chain that does
    not verify exits 1. With --html, the page needs nothing from the network
    to open: the chart (matplotlib, pip install 'spend-ledger[report]') is inline SVG.

    Example: ledger --home ./.ledger report --day 2026-03-02 --html /tmp/report.html
    """

    def body() -> int:
        from ledger.cli.app import State
        from ledger.cli.status_command import agent_view
        from ledger.runtime import build_runtime
        from ledger.services.report import gather

        wanted = None if day is None else parse_day(day)
        renderer = None if html is None else _html_renderer()
        runtime = build_runtime(State.home)
        zone = runtime.config.day_zone
        document = gather(runtime, wanted).to_document()
        document["agents"] = agent_view(runtime)
        if html is not None and renderer is not None:
            runtime.write_file(html, renderer(document).encode())
        if as_json:
            print_json(document)
        else:
            sys.stdout.write(render_text(document, zone))
        return 0

    if code := guarded(body):
        raise typer.Exit(code)


def register(app: Any) -> None:
    """Add ``report`` to the typer app."""
    app.command("report")(report_command)
