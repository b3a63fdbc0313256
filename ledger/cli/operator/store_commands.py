"""Fleet commands (SPEC §8): ``export``, ``keys enroll``, and ``init`` with a database store."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ledger.cli.output import guarded, print_json
from ledger.errors import UsageError

if TYPE_CHECKING:
    from ledger.runtime import Runtime


def init_fleet_host(runtime: "Runtime", daily_cap_usd: str | None, billing: str | None) -> int:
    """``ledger init`` on a fleet host: home, config, schema, this host's key, enrolment."""
    from ledger.services.fleet import init_fleet
    from ledger.services.gate.prices import init_prices

    config = runtime.config
    assert config.store_url is not None  # noqa: S101 - only called with a store URL
    result = init_fleet(runtime, daily_cap_usd, config.store_url, config.store_schema, billing)
    init_prices(runtime)
    enrolment = result.enrolment
    print_json(
        {
            "home": result.home,
            "config": str(runtime.config_path),
            "key_id": enrolment.key_id,
            "created_key": enrolment.created_key,
            "created_config": result.created_config,
            "store": result.store,
            "created_schema": result.created_schema,
            "enrolled": enrolment.enrolled or enrolment.already_enrolled,
            "root_signed": enrolment.root_signed,
            "fleet_secret": str(runtime.fleet_secret.path),
            "created_fleet_secret": enrolment.secret_created,
            "fleet_caps": result.fleet_caps,
        }
    )
    if enrolment.secret_created:
        sys.stderr.write(
            f"ledger: made this fleet's secret {runtime.fleet_secret.path}: copy it (mode 0600) "
            "to every other host's keys/ before its `ledger init`\n"
        )
    if enrolment.message:
        sys.stderr.write(f"ledger: {enrolment.message}\n")
    return 0


def export(
    since: Annotated[
        int,
        typer.Option(
            "--since",
            min=0,
            help="Leave out the first N entries: an export of the first N plus this one "
            "is the whole chain.",
        ),
    ] = 0,
    output_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            metavar="F",
            help="One row per recorded call instead of the raw chain: ndjson (with a "
            "signed manifest), csv or focus (FinOps FOCUS 1.2).",
        ),
    ] = None,
    first: Annotated[
        str | None,
        typer.Option("--from", metavar="D", help="With --format: the first budget day."),
    ] = None,
    last: Annotated[
        str | None,
        typer.Option("--to", metavar="D", help="With --format: the last budget day."),
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option("--tz", metavar="ZONE", help="With --format: the zone of the budget days."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", metavar="FILE", help="With --format: write to FILE."),
    ] = None,
) -> None:
    """Write the chain as JSONL on stdout, exactly the stored bytes of each entry.

    Works on both stores; for a fleet's database it is how `ledger verify-chain LOG`
    and other verifiers of the format check the chain offline.

    With --format ndjson|csv|focus --from D --to D: one row per recorded call
    of those budget days instead (the verdict and the record joined); ndjson
    ends with a manifest signed by the home's key (`ledger verify-export`).

    Example: ledger export > fleet-chain.jsonl && ledger verify-chain fleet-chain.jsonl --key K.pem

    Example: ledger export --format focus --from 2026-03-01 --to 2026-03-31 --output march.csv
    """
    from ledger.cli.operator.shared import State

    def body() -> int:
        from ledger.runtime import build_runtime

        if output_format is not None:
            from ledger.cli.operator.export_command import export_formatted

            return export_formatted(output_format, first, last, tz, output)
        if first is not None or last is not None or tz is not None or output is not None:
            raise UsageError("--from, --to, --tz and --output go with --format")

        runtime = build_runtime(State.home)
        sys.stdout.flush()
        binary = getattr(sys.stdout, "buffer", None)

        def write(line: bytes) -> None:
            # The stored bytes as they are; a text-only stdout gets the same UTF-8 text.
            if binary is not None:
                binary.write(line)
            else:
                sys.stdout.write(line.decode("utf-8", "surrogateescape"))

        if runtime.uses_database:
            chain = runtime.pg_chain
            with chain.read_transaction():
                for _seq, line in chain.iter_rows(since):
                    write(line)
        elif runtime.chain.exists():
            with runtime.chain.read_transaction():
                for number, line in enumerate(runtime.chain.iter_lines(), start=1):
                    if number > since:
                        write(line)
        sys.stdout.flush()
        if binary is not None:
            binary.flush()
        return 0

    code = guarded(body)
    if code:
        raise typer.Exit(code)


def keys_enroll(
    root_key: Annotated[
        Path | None,
        typer.Option(
            "--root-key",
            help="The offline root's private key PEM, when the fleet's trust store is "
            "root-signed; it signs the new version and is pinned in this home.",
        ),
    ] = None,
) -> None:
    """Add this host's writer key to the fleet's shared trust store (store.url must be set).

    A key already enrolled is left as it is. Every host of a fleet keeps its own
    home and key; `ledger init` enrols it too unless an offline root signs the
    trust store.

    Example: ledger keys enroll --root-key /media/offline/root.pem
    """
    from ledger.cli.operator.keys_commands import backfill_strict_after, load_root
    from ledger.cli.operator.shared import State

    def body() -> int:
        from ledger.core.signing import public_pem
        from ledger.runtime import build_runtime
        from ledger.services.fleet import enroll

        runtime = build_runtime(State.home)
        if not runtime.uses_database:
            raise UsageError("keys enroll: store.url is not set; a single home has no fleet")
        root = load_root(root_key) if root_key is not None else None
        keys: Any = runtime.keys
        result = enroll(
            runtime, root, lambda raw: runtime.write_file(keys.root_pin_path, public_pem(raw))
        )
        if result.enrolled or result.already_enrolled:
            backfill_strict_after(runtime, root)
        print_json(
            {
                "key_id": result.key_id,
                "created_key": result.created_key,
                "enrolled": result.enrolled,
                "already_enrolled": result.already_enrolled,
                "root_signed": result.root_signed,
                "store": runtime.database.display,
            }
        )
        return 0

    code = guarded(body)
    if code:
        raise typer.Exit(code)


def register(app: Any) -> None:
    """Add ``export`` and ``keys enroll`` to the typer app."""
    from ledger.cli.operator.keys_commands import keys_app

    app.command("export")(export)
    keys_app.command("enroll")(keys_enroll)
