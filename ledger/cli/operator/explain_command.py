"""``ledger explain VERDICT_REF [--json]`` (SPEC §10).

Exit codes: 0 explained, and the recomputed verdict agrees with the sealed one;
1 it does not (the explanation is still printed, with the differences), or no
verdict has that ref, or the chain breaks before it; 2 a malformed ref or a
prefix that names more than one entry; 65 an
unusable trust store; 74 the chain cannot be read; 78 a config error.
"""

import sys
from typing import Annotated, Any

import typer

from ledger.cli.output import guarded, print_error, print_json
from ledger.core.refs import FULL_REF_DIGITS, MIN_REF_PREFIX, REF_PREFIX_RE
from ledger.errors import EXIT_HALT, UsageError


def _usd(micros: object) -> str:
    return "-" if not isinstance(micros, int) else f"${micros / 1_000_000:,.6f}"


def _pct(value: object) -> str:
    return "-" if value is None else f"{value}%"


def render_text(document: dict[str, Any]) -> str:
    """The explanation as a few tables for people."""
    out = [
        f"verdict {document['verdict_ref']} (line {document['line']}, {document['ts_utc']})",
        f"  sealed:     {document['sealed']['verdict']}"
        + (f" / {r}" if (r := document["sealed"]["uncertainty_reason"]) else ""),
        f"  recomputed: {document['recomputed']['verdict']}"
        + (f" / {r}" if (r := document["recomputed"]["uncertainty_reason"]) else "")
        + f"  (row {document['recomputed']['deciding_row']}; config {document['config']})",
        (
            f"  provider {document['provider'] or '(none)'}, budget day {document['budget_day']} "
            f"(UTC day {document['utc_day']}), "
            f"estimate {_usd(document['estimated_micros'])}"
        ),
        "",
        (
            f"  {'cap':<20} {'cap':>14} {'used':>14} {'reserved':>14} {'estimate':>14} "
            f"{'projected':>10}"
        ),
    ]
    out += [
        f"  {c['scope']:<20} {_usd(c['cap_micros']):>14} {_usd(c['used_micros']):>14} "
        f"{_usd(c['reserved_micros']):>14} {_usd(c['estimate_micros']):>14} "
        f"{_pct(c['projected_pct']):>10}"
        for c in document["caps"]
    ]
    out += ["", "  verdict table rows, in order:"]
    out += [
        f"  {'*' if row['matched'] else ' '} {row['order']} {row['outcome']}"
        + (f" / {row['reason']}" if row["reason"] else "")
        + f": {'matched' if row['matched'] else 'no'} ({row['detail']})"
        for row in document["rows"]
    ]
    out += ["", "  billing readings relied on:"]
    for reading in document["billing_readings"]:
        if reading.get("reading", True) is None:
            out.append(f"    {reading['scope']}: none")
        else:
            out.append(
                f"    {reading['scope']}: {_usd(reading['usd_used_micros'])} as of "
                f"{reading['billing_ts']}, fetched {reading['fetched_at']} "
                f"({reading['age_seconds']:.0f} s before the verdict)"
            )
    if document["differences"]:
        out += ["", "  NOT REPRODUCIBLE:"] + [f"    {d}" for d in document["differences"]]
    return "\n".join(out) + "\n"


def explain_command(
    verdict_ref: Annotated[
        str,
        typer.Argument(
            metavar="VERDICT_REF",
            help="The verdict_ref a verdict printed, or any unique prefix of 12+ hex digits.",
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of tables.")
    ] = False,
) -> None:
    """Explain a sealed verdict from the chain alone: caps, every verdict rule, billing readings.

    Recomputes the verdict from the verified entries before it (with the config
    in force now) and compares it with what was sealed; a difference is
    reported and exits 1.

    Example: ledger --home ./.ledger explain 9c1f4be07a3d52e8 --json
    """

    def body() -> int:
        from ledger.cli.operator.shared import State
        from ledger.runtime import build_runtime
        from ledger.services.views.explain import explain

        if not REF_PREFIX_RE.fullmatch(verdict_ref):
            raise UsageError(
                f"VERDICT_REF: {verdict_ref!r} is not a verdict_ref "
                f"({MIN_REF_PREFIX} to {FULL_REF_DIGITS} lowercase hex digits)"
            )
        result = explain(build_runtime(State.home), verdict_ref)
        document = result.to_document()
        if as_json:
            print_json(document)
        else:
            sys.stdout.write(render_text(document))
        if not result.reproducible:
            print_error("the verdict is not reproducible from the chain: " + "; ".join(
                result.differences))  # fmt: skip
            return EXIT_HALT
        return 0

    if code := guarded(body):
        raise typer.Exit(code)


def register(app: Any) -> None:
    """Add ``explain`` to the typer app."""
    app.command("explain")(explain_command)
