"""``ledger init``: the home, its config, a writer key and the trust store."""

from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import exit_with as _exit
from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_error, print_json


def init(
    daily_cap_usd: Annotated[
        str | None,
        typer.Option(
            "--daily-cap-usd",
            help="usd.daily_cap for a new config; on an existing home it must match the "
            "cap there (change usd.daily_cap in ledger.toml instead).",
        ),
    ] = None,
    billing: Annotated[
        str | None,
        typer.Option(
            "--billing",
            help="`none`: no billing observer; count ledger's own records only "
            "(billing.stale_halt_pct = 100). Without it and without an observer, verdicts "
            "halt above 75% of a cap.",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="URL",
            help="A fleet's PostgreSQL store (store.url): this host joins it, and decides "
            "under the caps pushed there (`ledger config push`).",
        ),
    ] = None,
) -> None:
    """Create the home, its config, a writer key and the trust store.

    Example: ledger --home ./.ledger init --daily-cap-usd 50 --billing none

    Example: ledger init --store postgresql://ledger@db.internal/ledger
    """

    def body() -> int:
        from ledger.services.chain.home import init_home
        from ledger.services.chain.init_options import (
            checked_billing,
            checked_cap,
            refuse_changes_to_existing,
        )
        from ledger.services.gate.prices import init_prices

        checked_cap(daily_cap_usd)
        checked_billing(billing)
        runtime = _runtime(must_exist=False)
        if store is not None:
            _join(runtime, store)
        if runtime.config_path.exists() and (daily_cap_usd is not None or billing is not None):
            refuse_changes_to_existing(runtime.config, runtime.config_path, daily_cap_usd, billing)
        if runtime.uses_database:  # a fleet host (SPEC §8)
            from ledger.cli.operator.store_commands import init_fleet_host

            code = init_fleet_host(runtime, daily_cap_usd, billing)
            _billing_notice(runtime)
            return code
        result = init_home(runtime, daily_cap_usd, billing)
        init_prices(runtime)
        print_json(
            {
                "home": result.home,
                "config": str(runtime.config_path),
                "key_id": result.key_id,
                "created_key": result.created_key,
                "created_config": result.created_config,
            }
        )
        _billing_notice(runtime)
        return 0

    _exit(guarded(body))


def _join(runtime: Any, url: str) -> None:
    """``--store URL``: this home's chain is that store's (refused if it names another)."""
    from ledger.errors import UsageError

    if runtime.config_path.exists():
        written = runtime.host_config.store_url
        if written != url.strip():
            raise UsageError(
                f"--store: {runtime.config_path} names "
                + ("no store" if written is None else f"another store ({written})")
                + "; a file home moves to a store with `ledger store migrate --to URL`"
            )
        return
    runtime.environ = {**runtime.environ, "LEDGER_STORE_URL": url}
    runtime.__dict__.pop("host_config", None)


def _billing_notice(runtime: Any) -> None:
    """Say, before the first verdict, that a home without a bill halts near its caps."""
    from ledger.runtime import Runtime
    from ledger.services.chain.init_options import billing_notice

    # Read the config as written: the runtime cached none, or the one before init.
    notice = billing_notice(Runtime(runtime.home, runtime.environ).config)
    if notice:
        print_error(notice)


def register(app: Any) -> None:
    """Add ``init`` to the typer app."""
    app.command("init")(init)
