"""``ledger config push``: a fleet's caps and budgets into its store (SPEC §21)."""

from pathlib import Path
from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import exit_with as _exit
from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_json
from ledger.errors import ConfigError, UsageError

config_app = typer.Typer(
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "A fleet's caps and budgets, kept in its store.\n\nExample: ledger config push fleet.toml"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)


@config_app.command("push")
def config_push(
    file: Annotated[
        Path | None,
        typer.Argument(
            metavar="[FILE]",
            help="A TOML file with only [usd] and [[budgets]]; default: the [usd] and "
            "[[budgets]] of this host's ledger.toml.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Seal a fleet's caps and budgets in its store (a config.changed entry) for every host.

    Every host of the fleet decides under the newest pushed caps from its next
    verdict on, and a host that joins later (`ledger init --store URL`) from
    its first. A host's own ledger.toml then keeps host settings only: one
    whose [usd] or [[budgets]] differ from the fleet's is refused (exit 78).
    Nothing is sealed when the fleet already has exactly these caps.

    Example: ledger config push fleet.toml
    """

    def body() -> int:
        from ledger.core.sealed_config import host_tables, push_tables
        from ledger.edges.configfile import caps_from_tables, read_toml
        from ledger.edges.postgres.fleetconfig import newest_sealed
        from ledger.services.fleet_caps import push_caps

        runtime = _runtime()
        if not runtime.uses_database:
            raise UsageError(
                "config push: this home keeps its chain in events.jsonl; its caps are its "
                "ledger.toml (a change is sealed at the next verdict)"
            )
        own = read_toml(runtime.config_path) if runtime.config_path.exists() else {}
        own_tables = {name: own[name] for name in host_tables(own)}
        if file is None:
            if not own_tables:
                raise UsageError(
                    "config push: this host's ledger.toml has neither [usd] nor [[budgets]]; "
                    "name a FILE that has them"
                )
            document = caps_from_tables(own_tables)
        else:
            document = caps_from_tables(push_tables(read_toml(file)))
            if own_tables and caps_from_tables(own_tables) != document:
                names = " and ".join(f"[{n}]" if n == "usd" else "[[budgets]]" for n in own_tables)
                raise ConfigError(
                    f"config push: this host's ledger.toml sets other {names} than {file}; "
                    f"remove them from {runtime.config_path} (a fleet host keeps host "
                    "settings only) or push that file"
                )
        result = push_caps(runtime, document, lambda: newest_sealed(runtime.database))
        print_json(_document(result, runtime.database.display))
        return 0

    _exit(guarded(body))


def _document(result: Any, store: str) -> dict[str, Any]:
    return {
        "changed": result.changed,
        "entry_hash": result.entry_hash,
        "store": store,
        "before": result.before,
        "after": result.after,
    }


def register(app: Any) -> None:
    """Add ``config push`` to the typer app."""
    app.add_typer(config_app, name="config")
