"""Operator commands: ``reconcile``, ``rebuild-state``, ``daemon``."""

from typing import Annotated, Any

import typer

from ledger.cli.output import guarded, print_json
from ledger.errors import UsageError


def _runtime(ctx_home: str | None) -> Any:
    from ledger.runtime import build_runtime

    return build_runtime(ctx_home)


def _home() -> str | None:
    from ledger.cli.operator.shared import State

    return State.home


def _exit(code: int) -> None:
    if code:
        raise typer.Exit(code)


def reconcile_command(
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider", help="Reconcile only this provider (default: reconcile.providers)."
        ),
    ] = None,
    force_reason: Annotated[
        str | None,
        typer.Option(
            "--force-reason",
            help="Re-base the counter to the bill and clear drift, recording this reason.",
        ),
    ] = None,
) -> None:
    """Hold the local counter against the bill: exit 0 ok, 1 blocker, 2 defer/unreachable.

    Example: ledger --home ./.ledger reconcile --provider openai
    """

    def body() -> int:
        from ledger.core.observation import PROVIDER_RE
        from ledger.core.units import micros_to_usd
        from ledger.services.billing.reconcile import reconcile

        if provider is not None and not PROVIDER_RE.fullmatch(provider):
            raise UsageError(f"--provider: {provider!r} is not a provider id")
        if force_reason is not None and not force_reason.strip():
            raise UsageError("--force-reason: give the reason")
        runtime = _runtime(_home())
        providers = [provider] if provider else list(runtime.config.reconcile_providers)
        results = []
        for name in providers:
            outcome = reconcile(runtime, name, force_reason)
            results.append(
                {
                    "provider": outcome.provider,
                    "status": outcome.status,
                    "counter_usd": None
                    if outcome.counter_micros is None
                    else micros_to_usd(outcome.counter_micros),
                    "billing_usd": None
                    if outcome.billing_micros is None
                    else micros_to_usd(outcome.billing_micros),
                    "counter_micros": outcome.counter_micros,
                    "billing_micros": outcome.billing_micros,
                    "drift_pct": None if outcome.drift_pct is None else float(outcome.drift_pct),
                    "blocking": outcome.blocking,
                    "billing_api_unreachable": outcome.status == "unreachable",
                    "reason": outcome.reason,
                    "entry_hash": outcome.entry_hash,
                    "exit_code": outcome.exit_code,
                }
            )
        print_json(results[0] if len(results) == 1 else {"results": results})
        codes = {int(str(result["exit_code"])) for result in results}
        return 1 if 1 in codes else max(codes)

    _exit(guarded(body))


def rebuild_state_command() -> None:
    """Rebuild derived state (the gate's and the report's rollups) from the verified chain.

    Records ledger.state_rebuilt.

    Example: ledger --home ./.ledger rebuild-state
    """

    def body() -> int:
        from ledger.edges.files.asidestate import aside_of
        from ledger.services.billing.reconcile import rebuild_state
        from ledger.services.views.rollups import rebuild

        runtime = _runtime(_home())
        # Built beside the live state, which serves verdicts until the swap.
        outcome = rebuild_state(runtime, aside_of(runtime.states))
        # The report's rollups are derived state too: folded again from the chain.
        rollups = rebuild(runtime)
        print_json(
            {
                "entries": outcome.entries,
                "head_hash": outcome.head_hash,
                "previous_state": outcome.previous_state,
                "entry_hash": outcome.entry_hash,
                "rollup_entries": rollups.entries,
            }
        )
        return 0

    _exit(guarded(body))


def daemon_command(
    no_serve: Annotated[
        bool,
        typer.Option(
            "--no-serve",
            help="Do not run `ledger serve` for the home (per-call commands then run in-process).",
        ),
    ] = False,
) -> None:
    """Run the scheduler in the foreground: reconcile, poll and snapshot jobs; stops on SIGTERM.

    It also serves the per-call commands on gate.sock (as `ledger serve` does)
    unless --no-serve is given.

    Example: ledger --home /var/lib/ledger daemon
    """

    def body() -> int:
        from ledger.daemon import run_daemon

        return run_daemon(_runtime(_home()), serve=not no_serve)

    _exit(guarded(body))


def register(app: Any) -> None:
    """Add the operations commands to the typer app."""
    app.command("reconcile")(reconcile_command)
    app.command("rebuild-state")(rebuild_state_command)
    app.command("daemon")(daemon_command)
