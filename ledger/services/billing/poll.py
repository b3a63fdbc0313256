"""Reading the bill between reconciles (SPEC §5, Polling).

``poll`` runs the UsageObserver for one provider and records a successful
reading as a ``budget.observation`` with source ``poll``. Every later verdict
then sees ``used = max(local, billing)`` with a fresh bill, without running the
observer itself: spend made outside ``ledger`` (another tool on the same
account) reaches the gate within one poll.

A poll never blocks a verdict: the observer runs outside the chain lock, which
is taken only for the one append. It never drifts into a reconcile: it writes
only the observation, never a ``budget.reconcile``. It writes nothing when the
observer defers (SPEC §5), and nothing when it is unreachable: a failed poll
neither refreshes the reading nor adds an entry every few minutes of an outage;
verdicts near the cap then run the observer themselves (SPEC §4), and the
6-hourly reconcile still records the outage as ``billing_api_unreachable``.

Polls and reconciles of one provider never run at once: both hold the
provider's billing lock (``billing-<provider>.lock`` in the home, a file lock, so
it holds between the daemon's threads and a ``ledger reconcile`` run by cron
alike). A poll does not wait for it: when a reconcile or another poll is
reading that bill, the poll is skipped (``busy``); the other run records the
reading.
"""

from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from ledger.core.config import Config
from ledger.core.observation import Deferred, Unreachable, reading_payload
from ledger.errors import EXIT_OK, EXIT_USAGE, LockTimeoutError
from ledger.services.chain.state import fold_sealed, load_counter, save_counter
from ledger.services.chain.writer import Writer
from ledger.services.gate.deps import GateDeps

if TYPE_CHECKING:
    import datetime as dt

POLL_SOURCE: Final = "poll"
"""The ``source`` of the observations a poll records."""

_HOLD_MARGIN_SECONDS: Final = 5
"""Beyond the observer's timeout and one chain-lock wait, how long a poll may still
hold the billing lock: killing the observer, sealing, writing derived state."""


class NamedLocks(Protocol):
    """Cross-process locks by name."""

    def exclusive(
        self, name: str, wait_seconds: float | None = None
    ) -> AbstractContextManager[None]:
        """Hold the lock called ``name`` for the block.

        ``wait_seconds`` bounds the wait (0: do not wait); ``None`` waits
        ``chain.lock_timeout_seconds``. Entering raises ``LockTimeoutError`` when
        the wait runs out.
        """
        ...


class PollDeps(GateDeps, NamedLocks, Protocol):
    """What polling needs: the gate's ports and named locks."""


def billing_lock(
    locks: NamedLocks, config: Config, provider: str, *, wait: bool
) -> AbstractContextManager[None]:
    """The lock that keeps polls and reconciles of ``provider`` apart.

    Args:
        locks: where named locks come from.
        config: sets how long a waiting holder waits.
        provider: the provider id whose bill is read.
        wait: wait as long as one poll can hold the lock (a reconcile must run);
            ``False`` gives up at once (a poll that finds it busy is skipped).

    Returns:
        A context manager; entering it raises ``LockTimeoutError`` when the
        lock stays busy, and ``ChainIOError`` when the lock file cannot be opened.
    """
    wait_seconds = 0.0
    if wait:
        wait_seconds = float(
            config.observer_timeout_seconds + config.lock_timeout_seconds + _HOLD_MARGIN_SECONDS
        )
    return locks.exclusive(f"billing-{provider}", wait_seconds)


@dataclass(frozen=True, slots=True)
class PollOutcome:
    """One poll of one provider's bill.

    Attributes:
        provider: the provider id polled (``aggregate`` = all).
        status: ``recorded``; or, with nothing written, ``defer``,
            ``unreachable`` or ``busy`` (a reconcile or another poll of this
            provider was reading the bill).
        exit_code: 0 recorded, 2 otherwise (as ``ledger reconcile`` for defer).
        billing_micros: the bill, when recorded.
        billing_ts: up to when the bill is complete, when recorded.
        fetched_at: when the observer was started (``None`` when busy).
        reason: why nothing was recorded.
        entry_hash: the ``budget.observation`` entry, when recorded.
    """

    provider: str
    status: str
    exit_code: int
    billing_micros: int | None
    billing_ts: "dt.datetime | None"
    fetched_at: "dt.datetime | None"
    reason: str | None
    entry_hash: str | None


def poll(deps: PollDeps, provider: str = "aggregate") -> PollOutcome:
    """Read one provider's bill and record a successful reading.

    Args:
        deps: the ports (the runtime in production).
        provider: the provider id to poll (``aggregate`` = all).

    Returns:
        What happened; only ``recorded`` wrote anything.

    Raises:
        KeyFileError, InputDataError: no usable writer key or trust store (found
            before any lock file is created).
        LockTimeoutError: the chain lock stayed busy for the append.
        ChainIOError: the chain cannot be appended to (e.g. a torn tail) or a
            lock file cannot be opened.
    """
    writer = Writer(deps)
    writer.signer()  # no usable key: fail before creating any lock file
    with ExitStack() as held:
        try:
            held.enter_context(billing_lock(deps, deps.config, provider, wait=False))
        except LockTimeoutError:
            return PollOutcome(
                provider, "busy", EXIT_USAGE, None, None, None,
                "a reconcile or another poll is reading this bill", None,
            )  # fmt: skip
        # The observer runs outside the chain lock: verdicts go on meanwhile.
        result = deps.observe(provider)
        if isinstance(result, (Deferred, Unreachable)):
            status = "defer" if isinstance(result, Deferred) else "unreachable"
            return PollOutcome(
                provider, status, EXIT_USAGE, None, None, result.fetched_at, result.reason, None
            )
        with deps.chain.transaction() as tx:
            counter = load_counter(tx, deps)
            payload = reading_payload(result, source=POLL_SOURCE)
            sealed = writer.append(tx, "budget.observation", payload)
            if counter.problem is None:
                # Keep derived state at the head, so the next verdict folds nothing.
                fold_sealed(counter, sealed, tx.head())
                save_counter(counter, deps.states)
    return PollOutcome(
        provider, "recorded", EXIT_OK, result.usd_used_micros, result.billing_ts,
        result.fetched_at, None, sealed.entry_hash,
    )  # fmt: skip
