"""``ledger report``: one budget day (SPEC §10), or a range of days by dimension (§19).

A table for people, one JSON object with ``--json``, and with ``--html F`` a
self-contained page with a chart (matplotlib, the ``spend-ledger[report]`` extra,
imported by ``--html`` only). Exit codes: 0 reported; 1 the chain does not
verify or disagrees with its newest checkpoint, or ``--html`` without the
extra; 2 a malformed ``--day``, ``--month``, ``--from``/``--to``, ``--tz``, ``--by`` or
``--format``; 65 an unusable trust store; 74 the chain or
the page cannot be read or written; 75 lock timeout; 78 config error.
"""

import datetime as dt
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ledger.cli.operator.report_range import parse_day
from ledger.cli.output import guarded, print_json, text_table
from ledger.errors import LedgerError, UsageError


def parse_by(text: str) -> str:
    """A ``--by`` value: ``model``, ``session`` or ``agent``.

    Raises:
        UsageError: anything else.
    """
    from ledger.services.views.report_detail import BREAKDOWN_KEYS

    if text not in BREAKDOWN_KEYS:
        raise UsageError(f"--by: {text!r} is not one of {', '.join(BREAKDOWN_KEYS)}")
    return text


def _money(micros: int | None) -> str:
    """Money as ``status`` shows it: to the cent."""
    from ledger.core.units import cents_text

    return "-" if micros is None else cents_text(micros)


def _left(micros: int | None) -> str:
    """What is left, as ``status`` shows it: rounded down, never negative."""
    from ledger.cli.operator.status_command import _left_text

    return "-" if micros is None else _left_text(micros)


def _pct(value: Any) -> str:
    from ledger.core.units import pct_text

    return pct_text(value)


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
    from ledger.cli.operator.status_command import agent_lines

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
            _money(scope["reserved_micros"]), _left(scope["remaining_micros"]),
            _pct(pct), str(scope["records"]),
        ])  # fmt: skip
    out += text_table(rows)
    if document["unpriced_calls"]:
        out.append(f"  {document['unpriced_calls']} recorded call(s) without a price")
    verdicts = document["verdicts"]
    outcomes = ", ".join(f"{name} {count}" for name, count in verdicts["by_outcome"].items())
    out += ["", f"Verdicts: {verdicts['total']}" + (f" ({outcomes})" if outcomes else "")]
    if verdicts["by_reason"]:
        rows = [["VERDICT", "UNCERTAINTY REASON", "COUNT"]]
        rows += [[item["verdict"], item["uncertainty_reason"] or "-", str(item["count"])]
                 for item in verdicts["by_reason"]]  # fmt: skip
        out += text_table(rows)
    out += ["", f"Reconciles: {len(document['reconciles'])}"]
    if document["reconciles"]:
        rows = [["TIME", "SCOPE", "COUNTER", "BILLING", "DRIFT", "THRESHOLD", "RESULT"]]
        for item in document["reconciles"]:
            drift = item["drift_pct"]
            rows.append([
                _clock(item["ts_utc"], zone), item["provider"], _money(item["counter_micros"]),
                _money(item["billing_micros"]), _pct(drift),
                _pct(item["threshold_pct"]), _reconcile_result(item),
            ])  # fmt: skip
        out += text_table(rows)
    out += _detail_lines(document, zone)
    out += _budget_lines(document.get("budgets") or [])
    agents = document.get("agents")
    if agents is not None:
        lines = agent_lines(agents)
        out += ["", "Agent budgets (now):", *(lines or ["  none"])]
    return "\n".join(out) + "\n"


def _detail_lines(document: dict[str, Any], zone: dt.tzinfo) -> list[str]:
    """The bill readings and, with --by, the breakdown."""
    readings = document["bill_readings"]
    out = ["", f"Bill readings: {len(readings)}"]
    if readings:
        rows = [["TIME", "SCOPE", "BILL", "SOURCE"]]
        rows += [[_clock(item["time"], zone), item["scope"], _money(item["usd_micros"]),
                  item["source"]] for item in readings]  # fmt: skip
        out += text_table(rows)
    breakdown = document.get("breakdown")
    if breakdown is not None:
        out += ["", f"Spend by {breakdown['by']} (recorded calls):"]
        rows = [[breakdown["by"].upper(), "CALLS", "SPEND", "SHARE"]]
        rows += [[row["key"], str(row["calls"]), _money(row["usd_micros"]),
                  _pct(row["share_pct"])]
                 for row in breakdown["rows"]]  # fmt: skip
        out += text_table(rows) if breakdown["rows"] else ["  none"]
    return out


def _budget_lines(budgets: list[dict[str, Any]]) -> list[str]:
    """The budgets that applied on the day (their period to the day's end); none: nothing."""
    from ledger.core.budget_calendar import bounds_for_people

    if not budgets:
        return []
    rows = [["BUDGET", "PERIOD", "FROM", "TO", "USED", "RESERVED", "CAP", "USAGE", "HALTS"]]
    for item in budgets:
        value = item["per_value"]
        pct = item["usage_pct"]
        rows.append([
            item["name"] + ("" if value is None else f"[{value}]"), item["period"],
            *bounds_for_people(item["period"], item["period_start"], item["period_end"]),
            _money(item["used_micros"]), _money(item["reserved_micros"]),
            _money(item["cap_micros"]), _pct(pct), str(item["halts"]),
        ])  # fmt: skip
    return ["", "Budgets (their periods to the day's end):", *text_table(rows)]


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
    by: Annotated[
        list[str] | None,
        typer.Option(
            "--by",
            metavar="K",
            help="Group recorded spend by agent, session, key, tag, model, provider or client; "
            "repeat for nested groups (--by key --by model).",
        ),
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
    month: Annotated[
        str | None,
        typer.Option("--month", metavar="YYYY-MM", help="Every budget day of one month."),
    ] = None,
    first: Annotated[
        str | None,
        typer.Option("--from", metavar="D", help="The first budget day of a range, YYYY-MM-DD."),
    ] = None,
    last: Annotated[
        str | None,
        typer.Option("--to", metavar="D", help="The last budget day of a range, YYYY-MM-DD."),
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option(
            "--tz",
            metavar="ZONE",
            help="The reporting zone's IANA name (default: usd.day_timezone).",
        ),
    ] = None,
    output_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            metavar="F",
            help="table (default), json, csv (one row per group and day) or html.",
        ),
    ] = None,
) -> None:
    """Report spend: one budget day against its caps, or a range of days by team, key and model.

    With only --day (and --json, --html, one --by model|session|agent), one
    budget day: spend against caps and budgets, bills, verdicts, reconciles,
    agents; the part of the chain the day depends on (found through the
    rollups) is verified and folded as the gate folds it.

    With --month, --from/--to, --tz, --format or --by of any dimension, the
    recorded spend of every budget day in the range, one row per day and
    group (--by agent, session, key, tag, model, provider, client; repeat
    for nested groups); calls without a value are grouped under an empty
    value. These figures come from the rollups kept beside the chain, caught
    up from their saved position (the new entries are verified first), so a
    month costs little whatever the chain's length.

    A chain that does not verify exits 1. With --html, the page needs nothing
    from the network to open (matplotlib, pip install 'spend-ledger[report]').

    Example: ledger --home ./.ledger report --month 2026-03 --by key --by model --format csv
    """
    keys = list(by or [])

    def body() -> int:
        from ledger.cli.operator.shared import State
        from ledger.runtime import build_runtime

        ranged = (
            month is not None or first is not None or last is not None or tz is not None
            or output_format is not None or len(keys) > 1
            or any(key not in {"model", "session", "agent"} for key in keys)
        )  # fmt: skip
        if not ranged:
            return _day_report(day, keys[0] if keys else None, as_json=as_json, html=html)
        from ledger.cli.operator.report_range import (
            day_range,
            document,
            parse_format,
            parse_zone,
            render_csv,
            render_table,
        )
        from ledger.services.views.rollups import check_dimensions, spend

        chosen = parse_format(output_format or ("json" if as_json else "table"))
        if html is not None:
            raise UsageError("--html: use --format html for a range (the page goes to stdout)")
        check_dimensions(keys, {})
        zone = None if tz is None else parse_zone(tz)
        runtime = build_runtime(State.home)
        zone_name = tz or runtime.config.day_timezone
        start, end = day_range(day, month, first, last, runtime, zone)
        result = spend(runtime, start, end, keys, tz=zone)
        doc = document(result, zone_name)
        for note in result.notes:
            sys.stderr.write(f"ledger: {note}\n")
        if chosen == "json":
            print_json(doc)
        elif chosen == "csv":
            sys.stdout.write(render_csv(doc))
        elif chosen == "html":
            from ledger.cli.operator.report_range import page_scopes, render_page

            doc.update(page_scopes(runtime, start, end, zone))
            sys.stdout.write(render_page(doc, runtime.config))
        else:
            sys.stdout.write(render_table(doc))
        return 0

    if code := guarded(body):
        raise typer.Exit(code)


def _day_report(day: str | None, by: str | None, *, as_json: bool, html: Path | None) -> int:
    """One budget day against its caps (its part of the chain folded as the gate folds it)."""
    from ledger.cli.operator.shared import State
    from ledger.cli.operator.status_command import agent_view
    from ledger.runtime import build_runtime
    from ledger.services.views.report import gather

    wanted = None if day is None else parse_day(day)
    key = None if by is None else parse_by(by)
    renderer = None if html is None else _html_renderer()
    runtime = build_runtime(State.home)
    zone = runtime.config.day_zone
    document = gather(runtime, wanted, key).to_document()
    document["agents"] = agent_view(runtime)
    if html is not None and renderer is not None:
        runtime.write_file(html, renderer(document).encode())
    if as_json:
        print_json(document)
    else:
        sys.stdout.write(render_text(document, zone))
    return 0


def register(app: Any) -> None:
    """Add ``report`` to the typer app."""
    app.command("report")(report_command)
