"""``ledger snapshot`` and ``ledger recover``.

Exit codes: ``snapshot`` 0 written; 1 the chain is broken or empty (nothing
written). ``recover`` 0 recovered, left alone, or a dry-run report; 1 the
``--snapshot`` given does not verify; 65 the ``--snapshot`` given cannot be read
or parsed. Both: 65 unusable trust store or key, 74 I/O failure, 75 lock timeout,
78 config error.
"""

from pathlib import Path
from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import exit_with as _exit
from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_json


def snapshot() -> None:
    """Write a signed, compressed snapshot of the verified chain and prune old ones.

    Prints path (the manifest), entries, head_hash and files: every file the
    snapshot wrote, the compressed chain among them, as absolute paths.

    Example: ledger --home /var/lib/ledger snapshot
    """

    def body() -> int:
        from ledger.services.chain.snapshot import take_snapshot

        result = take_snapshot(_runtime())
        print_json(
            {
                "path": str(Path(result.path).absolute()),
                "entries": result.entries,
                "head_hash": result.head_hash,
                "files": [str(Path(name).absolute()) for name in result.files],
            }
        )
        return 0

    _exit(guarded(body))


def recover(
    snapshot: Annotated[
        Path | None,
        typer.Option("--snapshot", help="Restore from this snapshot instead of the newest."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would be done; change nothing.")
    ] = False,
) -> None:
    """Restore the longest valid prefix of a damaged chain; keep the damaged file as evidence.

    Example: ledger --home /var/lib/ledger recover --dry-run
    """

    def body() -> int:
        from ledger.services.chain.recover import recover as run_recover

        report = run_recover(_runtime(), snapshot, dry_run=dry_run)
        print_json(report.to_json())
        return 0

    _exit(guarded(body))


def register(app: Any) -> None:
    """Add snapshot and recover to the typer app."""
    app.command("snapshot")(snapshot)
    app.command("recover")(recover)
