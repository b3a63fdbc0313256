"""The daemon's scheduled jobs: each runs one service, logs one line, and never raises.

A job that fails logs why and returns: the scheduler must go on running the
others, and the next run of the same job may well succeed.
"""

import datetime as dt
import sys
from collections.abc import Callable

from ledger.core.refs import short_ref
from ledger.errors import LedgerError
from ledger.runtime import Runtime


def log_line(message: str) -> None:
    """One stamped line of the daemon's log on stderr."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: TID251 - log stamps
    sys.stderr.write(f"{stamp} ledger-daemon: {message}\n")
    sys.stderr.flush()


def _usd(micros: int | None) -> str:
    """Money in the log as people read it (``$0.44``); the chain keeps the exact micro-USD."""
    from ledger.core.units import cents_text

    return "none" if micros is None else cents_text(micros)


def reconcile_job(runtime_factory: Callable[[], Runtime], provider: str) -> None:
    """One scheduled reconcile; failures are logged, never raised into the scheduler."""
    from ledger.services.billing.reconcile import reconcile

    try:
        outcome = reconcile(runtime_factory(), provider)
    except LedgerError as exc:
        log_line(f"reconcile {provider}: error: {exc}")
        return
    log_line(
        f"reconcile {provider}: {outcome.status} counter={_usd(outcome.counter_micros)} "
        f"billing={_usd(outcome.billing_micros)} drift_pct={outcome.drift_pct}"
        + (f" reason={outcome.reason}" if outcome.reason else "")
    )


def poll_job(runtime_factory: Callable[[], Runtime], provider: str) -> None:
    """One scheduled poll of a provider's bill; failures are logged, never raised."""
    from ledger.services.billing.poll import poll

    try:
        outcome = poll(runtime_factory(), provider)
    except LedgerError as exc:
        log_line(f"poll {provider}: error: {exc}")
        return
    if outcome.billing_micros is not None:
        log_line(f"poll {provider}: {outcome.status} billing={_usd(outcome.billing_micros)}")
    else:
        log_line(f"poll {provider}: {outcome.status} reason={outcome.reason}")


def spool_job(runtime_factory: Callable[[], Runtime]) -> None:
    """Seal records this host spooled while the fleet's database was unreachable (SPEC §8)."""
    from ledger.services.gate.recording import drain_spool

    runtime = runtime_factory()
    if not runtime.spool.pending():
        return
    try:
        drained = drain_spool(runtime)
    except LedgerError as exc:
        log_line(f"spool: error: {exc}")
        return
    if drained:
        log_line(f"spool: sealed {drained} spooled record(s)")


def alerts_job(runtime_factory: Callable[[], Runtime]) -> None:
    """Follow the chain and send the alerts it calls for; failures are logged, never raised."""
    from ledger.edges.alertfiles import AlertStateFile
    from ledger.edges.webhook import post_all
    from ledger.services.billing.alerts import run_alerts
    from ledger.services.billing.health import standing_conditions
    from ledger.services.billing.spent import spend_alerts

    runtime = runtime_factory()
    try:
        run_alerts(
            runtime.chain, runtime.config, AlertStateFile(runtime.home),
            runtime.clock.now(), post_all, lambda line: log_line(f"alerts: {line}"),
            lambda: standing_conditions(runtime), lambda: spend_alerts(runtime),
        )  # fmt: skip
    except LedgerError as exc:
        log_line(f"alerts: error: {exc}")


def prime_alerts_job(runtime: Runtime) -> None:
    """Where alerts start, fixed before the daemon says it has started; failures are logged."""
    from ledger.edges.alertfiles import AlertStateFile
    from ledger.services.billing.alerts import prime_alerts

    if not runtime.config.alert_rules:
        return  # no alerts: the chain (a fleet's database) is not even opened
    try:
        line = prime_alerts(runtime.chain, runtime.config, AlertStateFile(runtime.home))
    except LedgerError as exc:
        log_line(f"alerts: error: {exc}")
        return
    if line is not None:
        log_line(f"alerts: following the chain after line {line}")


class VerifyJob:
    """The daemon's verification: at start the entries after the newest checkpoint, then all.

    Neither holds the chain lock. The first run (at start) reads only what no
    checkpoint vouches for yet, so a daemon on a long chain is verified in
    seconds; every later run (each ``chain.verify_interval_hours``) reads every
    entry again, the only way to see an edit inside a verified prefix.
    """

    def __init__(self, runtime_factory: Callable[[], Runtime]) -> None:
        self.runtime_factory = runtime_factory
        self.runs = 0

    def __call__(self) -> None:
        """One verification; a BROKEN finding is kept for the gate. Never raises."""
        self.runs += 1
        verify_job(self.runtime_factory, full=self.runs > 1)


def verify_job(runtime_factory: Callable[[], Runtime], *, full: bool = True) -> None:
    """One verification (all entries unless ``full`` is false); never raises.

    A BROKEN finding is kept for the gate.
    """
    from ledger.services.chain.findings import verify_and_remember

    try:
        outcome = verify_and_remember(runtime_factory(), full=full)
    except LedgerError as exc:
        log_line(f"verify: error: {exc}")
        return
    if outcome is None:
        return
    if outcome.ok:
        resumed = outcome.resumed_at
        after = (
            ""
            if resumed is None
            else f" (entries after {resumed} checked; the rest at the checkpoint)"
        )
        log_line(f"verify: OK {outcome.entries} entries{after}")
    else:
        log_line(
            f"verify: BROKEN line {outcome.line}: {outcome.reason}; "
            "verdicts halt until `ledger recover`"
        )


def snapshot_job(runtime_factory: Callable[[], Runtime]) -> None:
    """One scheduled snapshot; failures are logged, never raised into the scheduler."""
    from ledger.services.chain.snapshot import take_snapshot

    try:
        result = take_snapshot(runtime_factory())
    except LedgerError as exc:
        log_line(f"snapshot: error: {exc}")
        return
    log_line(f"snapshot: {result.path} entries={result.entries} head={short_ref(result.head_hash)}")
