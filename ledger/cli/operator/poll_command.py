"""``ledger poll``: read the bill once, as ``ledger daemon`` does every ``billing.poll_seconds``.

For cron and systemd timers that run the jobs without the daemon. Exit codes: 0
every reading recorded; 2 a provider's observer deferred or was unreachable, or a
reconcile or another poll of it was reading the bill (nothing written for it), or
a bad ``--provider``; 65 unusable key or trust store, 74 I/O failure (a torn
tail), 75 chain lock timeout, 78 config error.
"""

from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import exit_with as _exit
from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_json
from ledger.errors import UsageError


def poll_command(
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            help="Poll only this provider's bill (default: every one in reconcile.providers).",
        ),
    ] = None,
) -> None:
    """Read the bill and record it as budget.observation: exit 0 recorded, 2 nothing written.

    Runs the observer for each provider and records every successful reading
    (source "poll"), so verdicts see spend made outside ledger. A _defer or
    unreachable answer, or a reconcile of the same provider running meanwhile,
    writes nothing (exit 2). Never a budget.reconcile: drift is not judged.

    Example: ledger --home /var/lib/ledger poll --provider openai
    """

    def body() -> int:
        from ledger.core.observation import PROVIDER_RE
        from ledger.core.timefmt import format_ts
        from ledger.core.units import micros_to_usd
        from ledger.services.billing.poll import poll

        if provider is not None and not PROVIDER_RE.fullmatch(provider):
            raise UsageError(f"--provider: {provider!r} is not a provider id")
        runtime = _runtime()
        providers = [provider] if provider else list(runtime.config.reconcile_providers)
        results = []
        for name in providers:
            outcome = poll(runtime, name)
            billing = outcome.billing_micros
            results.append(
                {
                    "provider": outcome.provider,
                    "status": outcome.status,
                    "recorded": outcome.entry_hash is not None,
                    "billing_usd": None if billing is None else micros_to_usd(billing),
                    "billing_micros": billing,
                    "billing_ts": None
                    if outcome.billing_ts is None
                    else format_ts(outcome.billing_ts),
                    "fetched_at": None
                    if outcome.fetched_at is None
                    else format_ts(outcome.fetched_at),
                    "reason": outcome.reason,
                    "entry_hash": outcome.entry_hash,
                    "exit_code": outcome.exit_code,
                }
            )
        print_json(results[0] if len(results) == 1 else {"results": results})
        return max(int(str(result["exit_code"])) for result in results)

    _exit(guarded(body))


def register(app: Any) -> None:
    """Add ``poll`` to the typer app."""
    app.command("poll")(poll_command)
