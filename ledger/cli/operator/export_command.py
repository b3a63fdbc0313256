"""``ledger export --format ndjson|csv|focus`` and ``ledger verify-export FILE`` (SPEC §19).

``export --format`` writes one row per recorded call of a range of budget
days: NDJSON ending with a signed manifest, a CSV a spreadsheet opens as is,
or the FinOps FOCUS 1.2 columns. ``verify-export`` checks an NDJSON export:
exit 0 verified, 1 it does not verify, 65 it cannot be read.
"""

import csv
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import typer

from ledger.cli.output import guarded, print_error, print_json
from ledger.errors import EXIT_HALT, InputDataError, UsageError

EXPORT_FORMATS = ("ndjson", "csv", "focus")


def export_formatted(
    fmt: str, first: str | None, last: str | None, tz: str | None, output: Path | None
) -> int:
    """Write the export of ``fmt`` to ``output`` (or stdout); the command's body.

    Raises:
        UsageError: a bad format, range or zone.
    """
    from ledger.cli.operator.report_range import bound, parse_zone
    from ledger.cli.operator.shared import State
    from ledger.runtime import build_runtime

    if fmt not in EXPORT_FORMATS:
        raise UsageError(f"--format: {fmt!r} is not one of {', '.join(EXPORT_FORMATS)}")
    if first is None or last is None:
        raise UsageError("--format needs --from D and --to D (budget days)")
    start, end = bound("--from", first), bound("--to", last)
    zone = None if tz is None else parse_zone(tz)
    runtime = build_runtime(State.home)
    buffer = io.BytesIO()
    binary: BinaryIO | None = getattr(sys.stdout, "buffer", None)

    def write(data: bytes) -> None:
        if output is not None:
            buffer.write(data)
        elif binary is not None:
            binary.write(data)
        else:  # a text-only stdout gets the same UTF-8 text
            sys.stdout.write(data.decode("utf-8"))

    sys.stdout.flush()
    if fmt == "ndjson":
        from ledger.services.views.exports import export_ndjson

        export_ndjson(runtime, start, end, zone, write)
    else:
        _write_table(runtime, fmt, start, end, zone, write)
    if output is not None:
        runtime.write_file(output, buffer.getvalue())
    elif binary is not None:
        binary.flush()
    return 0


def _write_table(
    runtime: Any, fmt: str, start: str, end: str, zone: Any, out: Callable[[bytes], object]
) -> None:
    """A CSV with a header row (UTF-8, ISO times, decimal USD), flushed every few rows."""
    from ledger.core.export_rows import FOCUS_COLUMNS, ROW_COLUMNS, csv_cells, focus_cells
    from ledger.services.views.exports import export_calls

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\r\n")
    writer.writerow(FOCUS_COLUMNS if fmt == "focus" else ROW_COLUMNS)
    cells = focus_cells if fmt == "focus" else csv_cells

    def row(item: dict[str, Any]) -> None:
        writer.writerow(cells(item))
        if text.tell() > 1 << 16:
            out(text.getvalue().encode("utf-8"))
            text.seek(0)
            text.truncate()

    export_calls(runtime, start, end, zone, row)
    out(text.getvalue().encode("utf-8"))


def verify_export_command(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE", help="An export written by `ledger export --format ndjson`."
        ),
    ],
    key: Annotated[
        Path | None,
        typer.Option(
            "--key",
            metavar="PEM",
            help="Check the signature with this public key (default: the home's trust store).",
        ),
    ] = None,
) -> None:
    """Check an NDJSON export: its manifest's row count, digest and signature.

    On the home that wrote it (without --key), also checks that the rows are
    exactly the chain's records from the first row to the last, in order.
    Prints {"ok", "rows", "from", "to", "head_hash", "key_id", "in_chain"};
    exit 0 when it verifies, 1 when it does not (one line on stderr says
    why), 65 when FILE or the key cannot be read.

    Example: ledger verify-export march.ndjson
    """

    def body() -> int:
        from ledger.cli.operator.shared import State
        from ledger.edges.files.keyfiles import load_public_key_file
        from ledger.services.views.exports import check_export, rows_in_chain

        try:
            data = file.read_bytes()
        except OSError as exc:
            raise InputDataError(f"cannot read {file}: {exc.strerror}") from exc
        runtime = None
        trust = None
        public = None if key is None else load_public_key_file(key)
        if public is None:
            from ledger.runtime import build_runtime

            runtime = build_runtime(State.home)
            trust = runtime.keys.load_trust()

        def public_key_for(key_id: str) -> bytes | None:
            if public is not None:
                return public
            found = None if trust is None else trust.key(key_id)
            return None if found is None else found.public_raw

        check = check_export(data, public_key_for)
        in_chain = None
        if check.ok and runtime is not None:
            problem = rows_in_chain(runtime, check.rows)
            in_chain = problem is None
            if problem is not None:
                check.ok, check.reason = False, problem
        manifest = check.manifest or {}
        print_json(
            {
                "ok": check.ok,
                "rows": manifest.get("rows"),
                "from": manifest.get("from"),
                "to": manifest.get("to"),
                "head_hash": manifest.get("head_hash"),
                "key_id": manifest.get("key_id"),
                "in_chain": in_chain,
            }
        )
        if not check.ok:
            print_error(f"export does not verify: {check.reason}")
            return EXIT_HALT
        return 0

    if code := guarded(body):
        raise typer.Exit(code)


def register(app: Any) -> None:
    """Add ``verify-export`` to the typer app (``export`` lives with the store commands)."""
    app.command("verify-export")(verify_export_command)
