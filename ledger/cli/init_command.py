"""``ledger init``: the home, its config, a writer key and the trust store."""

from typing import Annotated, Any

import typer

from ledger.cli.operator import exit_with as _exit
from ledger.cli.operator import runtime as _runtime
from ledger.cli.output import guarded, print_json


def init(
    daily_cap_usd: Annotated[
        str | None, typer.Option("--daily-cap-usd", help="usd.daily_cap for a new config.")
    ] = None,
) -> None:
    """Create the home, its config, a writer key and the trust store.

    Example: ledger --home ./.ledger init --daily-cap-usd 50
    """

    def body() -> int:
        from ledger.services.chain.home import init_home
        from ledger.services.gate.prices import init_prices

        runtime = _runtime(must_exist=False)
        if runtime.uses_database:  # a fleet host (SPEC §8)
            from ledger.cli.store_commands import init_fleet_host

            return init_fleet_host(runtime, daily_cap_usd)
        result = init_home(runtime, daily_cap_usd)
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
        return 0

    _exit(guarded(body))


def register(app: Any) -> None:
    """Add ``init`` to the typer app."""
    app.command("init")(init)
