"""``ledger store migrate --to URL``: a file home moves to a PostgreSQL store (SPEC §21)."""

from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import exit_with as _exit
from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_json
from ledger.errors import ChainIOError, UsageError

store_app = typer.Typer(
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "The chain's store: move a file home into PostgreSQL."
        "\n\nExample: ledger store migrate --to postgresql://ledger@db.internal/ledger"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)


@store_app.command("migrate")
def store_migrate(
    to: Annotated[
        str,
        typer.Option("--to", metavar="URL", help="The PostgreSQL store (becomes store.url)."),
    ],
    schema: Annotated[
        str,
        typer.Option("--schema", metavar="NAME", help="Its schema (becomes store.schema)."),
    ] = "ledger",
) -> None:
    """Move this home's chain, trust store, checkpoints and gateway keys into an empty store.

    The chain must verify; it is copied in one transaction and verified there
    to the same head before it commits. ledger.toml then names the store,
    and events.jsonl is kept read-only in migrated/ as evidence. A store that
    already holds another chain is refused (exit 65). The writer keys stay in
    this home; other hosts join with `ledger init --store URL`.

    Example: ledger store migrate --to postgresql://ledger@db.internal/ledger
    """

    def body() -> int:
        from ledger.core.config_template import store_section
        from ledger.edges.fileio import read_regular
        from ledger.edges.postgres.migrate import (
            boundaries_of,
            copy_home,
            keep_as_evidence,
            verify_lines,
        )
        from ledger.runtime import CHAIN_FILE, Runtime

        home = _runtime()
        if home.uses_database:
            raise UsageError("store migrate: this home's chain is already in a store")
        chain_path = home.home / CHAIN_FILE
        if not chain_path.exists():
            raise UsageError(f"store migrate: {chain_path} does not exist: nothing to move")
        env = {**home.environ, "LEDGER_STORE_URL": to, "LEDGER_STORE_SCHEMA": schema}
        target = Runtime(home.home, env)
        target.host_config  # noqa: B018 - the URL and schema are checked before anything moves
        with home.chain.transaction():  # no verdict appends to the file meanwhile
            lines = list(home.chain.iter_lines())  # every sealed segment, then the open one
            trust = home.keys.load_trust()
            report = verify_lines(lines, trust)
            if not report.ok:
                raise ChainIOError(
                    f"store migrate: {chain_path} does not verify at line {report.line} "
                    f"({report.reason}); nothing was copied (`ledger recover` first)"
                )
            checkpoints = sorted(home.checkpoints_dir.glob("checkpoint-*.json"))
            target.database.ensure_schema()
            copied = copy_home(
                lines, report, read_regular(home.keys.trust_path), checkpoints,
                home.gateway_keys.load(), target.pg_chain, target.fleet_secret, trust,
                boundaries_of(home.chain),
            )  # fmt: skip
            text = home.config_path.read_text(encoding="utf-8") if home.config_path.exists() else ""
            home.write_file(home.config_path, (text + store_section(to, schema)).encode("utf-8"))
            evidence = keep_as_evidence(chain_path, home.home)
        moved = Runtime(home.home, home.environ)
        after = moved.pg_chain.verify(moved.keys.load_trust())
        if not after.ok or after.head_hash != report.head_hash:
            raise ChainIOError(
                f"store migrate: the store's chain does not verify to the file's head after "
                f"the move ({after.reason or after.head_hash}); the file is kept in {evidence}"
            )
        print_json(_document(report, copied, target, evidence))
        return 0

    _exit(guarded(body))


def _document(report: Any, copied: Any, target: Any, evidence: Any) -> dict[str, Any]:
    return {
        "store": target.database.display,
        "entries": report.entries,
        "head_hash": report.head_hash,
        "checkpoints": copied.checkpoints,
        "gateway_keys": copied.gateway_keys,
        "segments": copied.segments,
        "resumed": copied.already,
        "evidence": str(evidence),
        "fleet_secret": str(target.fleet_secret.path),
    }


def register(app: Any) -> None:
    """Add ``store migrate`` to the typer app."""
    app.add_typer(store_app, name="store")
