"""``ledger metrics [--output F]``: the Prometheus text exposition format (SPEC §10).

``prometheus-client`` (the ``spend-ledger[metrics]`` extra) is imported by this
command only. With ``--output`` the file is written atomically
(``write_to_textfile``: a temporary file renamed into place), for
node_exporter's textfile collector. Exit codes: 0 written; 1 the extra is not
installed; 74 the chain or the output cannot be read or written; 75 lock
timeout; 78 config error.
"""

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ledger.cli.output import guarded
from ledger.errors import ChainIOError, LedgerError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ledger.services.views.metrics import Metrics


def _money(micros: int, known: bool) -> float:
    return micros / 1e6 if known else math.nan


def build_registry(metrics: "Metrics") -> "CollectorRegistry":
    """The gauges of one ``Metrics`` in a fresh registry."""
    from prometheus_client import CollectorRegistry, Gauge

    registry = CollectorRegistry()
    scope_gauges = {
        name: Gauge(f"ledger_{name}", text, ["scope"], registry=registry)
        for name, text in (
            ("used_usd", "Spend counted today (the larger of counter and bill), USD."),
            ("reserved_usd", "Open reservations today, USD."),
            ("cap_usd", "The cap, USD."),
            ("usage_pct", "100 x (used + reserved) / cap."),
        )
    }
    drift = Gauge(
        "ledger_reconcile_drift_pct", "The newest reconcile's drift, percent.", ["scope"],
        registry=registry,
    )  # fmt: skip
    billing_age = Gauge(
        "ledger_billing_reading_age_seconds",
        "Seconds since the newest billing reading was fetched.", ["scope"], registry=registry,
    )  # fmt: skip
    # While the counter cannot be trusted the money figures are unknown: NaN, never 0.
    known = metrics.counter_trusted
    for scope in metrics.scopes:
        if scope.billing_age_seconds is not None:
            billing_age.labels(scope.scope).set(scope.billing_age_seconds)
        scope_gauges["used_usd"].labels(scope.scope).set(_money(scope.used_micros, known))
        scope_gauges["reserved_usd"].labels(scope.scope).set(_money(scope.reserved_micros, known))
        scope_gauges["cap_usd"].labels(scope.scope).set(scope.cap_micros / 1e6)
        if not known:
            scope_gauges["usage_pct"].labels(scope.scope).set(math.nan)
        elif scope.usage_pct is not None:
            scope_gauges["usage_pct"].labels(scope.scope).set(scope.usage_pct)
        if scope.drift_pct is not None:
            drift.labels(scope.scope).set(scope.drift_pct)
    verdicts = Gauge(
        "ledger_verdicts_today",
        "Verdicts sealed today (the budget day) by outcome and uncertainty reason.",
        ["outcome", "reason"], registry=registry,
    )  # fmt: skip
    for (outcome, reason), count in sorted(metrics.verdicts.items()):
        verdicts.labels(outcome, reason).set(count)
    unknown = Gauge(
        "ledger_unknown_usage_records_today",
        "Records sealed today (the budget day) whose usage reported what has no price here, "
        "by what it was; each was recorded at least at its estimate.",
        ["kind"], registry=registry,
    )  # fmt: skip
    for kind, count in sorted(metrics.unknown_usage.items()):
        unknown.labels(kind).set(count)
    _budget_gauges(metrics, registry)
    Gauge("ledger_chain_entries", "Entries in the chain.", registry=registry).set(metrics.entries)
    Gauge(
        "ledger_counter_trusted", "1 while the counter can be trusted, else 0.",
        registry=registry,
    ).set(1 if metrics.counter_trusted else 0)  # fmt: skip
    if metrics.snapshot_age_seconds is not None:
        Gauge(
            "ledger_snapshot_age_seconds", "Seconds since the newest snapshot.",
            registry=registry,
        ).set(metrics.snapshot_age_seconds)  # fmt: skip
    return registry


def _budget_gauges(metrics: "Metrics", registry: "CollectorRegistry") -> None:
    """Each ``[[budgets]]`` entry in its current period, one series per value of ``per``."""
    from prometheus_client import Gauge

    if not metrics.budgets:
        return
    gauges = {
        name: Gauge(f"ledger_budget_{name}", text, ["budget", "per"], registry=registry)
        for name, text in (
            ("used_usd", "Spend counted in the budget's current period or window, USD."),
            ("reserved_usd", "Open reservations on the budget, USD."),
            ("cap_usd", "The budget's cap, USD."),
            ("usage_pct", "100 x (used + reserved) / cap of the budget."),
        )
    }
    known = metrics.counter_trusted
    for row in metrics.budgets:
        labels = (row["name"], row["per_value"] or "")
        gauges["used_usd"].labels(*labels).set(_money(row["used_micros"], known))
        gauges["reserved_usd"].labels(*labels).set(_money(row["reserved_micros"], known))
        gauges["cap_usd"].labels(*labels).set(row["cap_micros"] / 1e6)
        if not known:
            gauges["usage_pct"].labels(*labels).set(math.nan)
        elif row["usage_pct"] is not None:
            gauges["usage_pct"].labels(*labels).set(row["usage_pct"])


def metrics_command(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            help="Write atomically to this file (node_exporter's textfile collector) "
            "instead of stdout.",
        ),
    ] = None,
) -> None:
    """Print today's figures in the Prometheus text format: caps, verdicts, chain, snapshots.

    Gauges: ledger_used_usd, ledger_reserved_usd, ledger_cap_usd and
    ledger_usage_pct per scope; ledger_verdicts_today by outcome and reason;
    ledger_unknown_usage_records_today by what the usage reported that has no price;
    ledger_chain_entries; ledger_reconcile_drift_pct; ledger_snapshot_age_seconds;
    ledger_budget_used_usd, ledger_budget_reserved_usd, ledger_budget_cap_usd and
    ledger_budget_usage_pct per budget and value of its per key.
    Needs the metrics extra: pip install 'spend-ledger[metrics]'.

    Example: ledger --home /var/lib/ledger metrics --output /var/lib/node_exporter/ledger.prom
    """

    def body() -> int:
        try:
            from prometheus_client import generate_latest, write_to_textfile
        except ImportError as exc:
            raise LedgerError(
                "metrics needs prometheus-client: pip install 'spend-ledger[metrics]'"
            ) from exc
        from ledger.cli.operator.shared import State
        from ledger.runtime import build_runtime
        from ledger.services.views.metrics import gather

        registry = build_registry(gather(build_runtime(State.home)))
        if output is None:
            sys.stdout.write(generate_latest(registry).decode())
            return 0
        try:
            write_to_textfile(str(output), registry)
        except OSError as exc:
            raise ChainIOError(f"cannot write {output}: {exc.strerror}") from exc
        return 0

    if code := guarded(body):
        raise typer.Exit(code)


def register(app: Any) -> None:
    """Add ``metrics`` to the typer app."""
    app.command("metrics")(metrics_command)
