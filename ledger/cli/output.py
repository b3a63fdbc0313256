"""Printing: one JSON object on stdout, one ``ledger: …`` line on stderr."""

import json
import sys
from collections.abc import Callable
from typing import Any

from ledger.errors import LedgerError

EXIT_SOFTWARE = 70


def print_json(document: dict[str, Any]) -> None:
    """Machine output: one JSON object and a newline on stdout."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")


def print_error(message: str) -> None:
    """Human output for a failure: exactly one line on stderr."""
    one_line = " ".join(str(message).split())
    sys.stderr.write(f"ledger: {one_line}\n")


def guarded(action: Callable[[], int]) -> int:
    """Run a command body, turning every error into one stderr line and a code.

    A ``LedgerError`` exits with its documented code. Anything else is a bug; it
    still gets one line and code 70 (EX_SOFTWARE), never a traceback.
    """
    try:
        return action()
    except LedgerError as exc:
        print_error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        print_error("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        print_error(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_SOFTWARE


def text_table(rows: list[list[str]]) -> list[str]:
    """Rows as aligned text lines, each indented two spaces (``status`` and ``report``).

    Sessions and agents are the callers' text: a cell's control codes are shown
    escaped, never sent to a terminal.
    """
    from ledger.core.ids import printable

    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  "
        + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
