"""``ledger archive --before DATE --to DIR``: sealed segments out of the home.

Exit codes: 0 archived (or nothing old enough); 2 a bad command line (DATE not
a date, DIR inside the home); 65 unusable trust store or key; 74 I/O failure;
75 lock timeout; 78 config error.
"""

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import exit_with as _exit
from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_json
from ledger.errors import UsageError


def _before(text: str) -> str:
    """DATE (``YYYY-MM-DD``, midnight UTC, or an ISO-8601 time) in the chain's format."""
    from ledger.core.timefmt import format_ts

    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise UsageError(f"archive: --before {text!r} is not a date (YYYY-MM-DD)") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return format_ts(moment.astimezone(dt.UTC))


def archive(
    before: Annotated[
        str,
        typer.Option("--before", help="Archive segments whose entries are all before this date."),
    ],
    to: Annotated[
        Path, typer.Option("--to", help="The folder to move them to (outside the home).")
    ],
) -> None:
    """Move sealed chain segments older than a date out of the home, with a signed manifest.

    The home keeps each segment's manifest and the signed checkpoint sealing
    it: `verify-chain` verifies the rest without the archive, and the whole
    chain with `--archive DIR`.

    Example: ledger archive --before 2026-01-01 --to /mnt/cold/ledger-archive
    """

    def body() -> int:
        from ledger.core.archive import archive_manifest
        from ledger.core.canonical import canonical_bytes
        from ledger.core.timefmt import format_ts
        from ledger.edges.files.archivefiles import archive_before
        from ledger.edges.files.segmentfiles import SegmentDir
        from ledger.runtime import SEGMENTS_DIR

        limit = _before(before)
        runtime = _runtime()
        if runtime.uses_database:
            raise UsageError("archive: this home's chain is in a store, not in segments")
        home = runtime.home.resolve()
        target = to.absolute()
        if target.resolve() == home or home in target.resolve().parents:
            raise UsageError(f"archive: --to {to} is inside the home {runtime.home}")
        trust = runtime.keys.load_trust()
        signer = runtime.keys.active_signer(trust)

        def manifest(chosen: Any) -> tuple[str, bytes]:
            now = format_ts(runtime.clock.now())
            listed = [(s.number, s.compressed_sha256, s.checkpoint) for s in chosen]
            document = archive_manifest(signer, now, str(target), listed)
            stamp = now.replace("-", "").replace(":", "").replace(".", "")
            return stamp, canonical_bytes(document) + b"\n"

        segments = SegmentDir(runtime.home / SEGMENTS_DIR)
        chosen, path = archive_before(segments, target, limit, manifest, runtime.chain.transaction)
        print_json(
            {
                "archived": [segment.number for segment in chosen],
                "entries": sum(segment.entries for segment in chosen),
                "to": str(target),
                "manifest": None if path is None else str(path.absolute()),
            }
        )
        return 0

    _exit(guarded(body))


def register(app: Any) -> None:
    """Add archive to the typer app."""
    app.command("archive")(archive)
