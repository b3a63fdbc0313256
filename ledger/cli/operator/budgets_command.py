"""``ledger budgets``: every ``[[budgets]]`` entry with its current period's figures.

A table for people, one JSON object with ``--json``. Writes nothing. Exit 0; 78
for a config error (a malformed budget among them).
"""

import sys
from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_json


def budgets(
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object instead of a table.")
    ] = False,
) -> None:
    """List every budget: its current period, used, reserved, cap and % (one row per value of per).

    Example: ledger --home ./.ledger budgets --json
    """

    def body() -> int:
        from ledger.services.gate.budget_views import budget_rows, budget_table

        document = budget_rows(_runtime())
        if as_json:
            print_json(document)
        elif not document["budgets"]:
            sys.stdout.write("No budgets defined ([[budgets]] in ledger.toml).\n")
        else:
            sys.stdout.write("\n".join(budget_table(document)) + "\n")
        return 0

    code = guarded(body)
    if code:
        raise typer.Exit(code)


def register(app: Any) -> None:
    """Add ``budgets`` to the typer app."""
    app.command("budgets")(budgets)
