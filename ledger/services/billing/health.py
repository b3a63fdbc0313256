"""The daemon's health check: what halts every verdict right now, found without sealing.

Run with the alert follower every ``alerts.check_seconds``. It reads what a
verdict would read, writes nothing, and names each condition standing now
(``ledger.core.incidents``):

- ``unavailable`` (scope ``store``): the store cannot be reached or read (a
  fleet's database down, a home whose chain cannot be opened);
- ``broken`` (scope ``chain``): the chain ends in a torn line, or verdicts halt
  ``counter_inconsistent`` (a BROKEN finding, a derived state that fails its
  check, a checkpoint that disowns the chain);
- ``uncertainty`` (scope ``aggregate``): a verdict for $0 more on the aggregate
  would halt for another uncertainty (billing stale or lagging, drift, the clock).

``None`` means the check could not tell (the chain lock stayed busy): the
incidents already open stay as they are.
"""

from ledger.core.incidents import Condition
from ledger.core.verdict_kind import Uncertainty
from ledger.errors import ChainIOError, LockTimeoutError, TornTailError
from ledger.services.gate.deps import GateDeps
from ledger.services.gate.figures import usage


def _store_condition(deps: GateDeps) -> Condition | None:
    """``unavailable`` or ``broken`` when the chain's head cannot be read; else ``None``."""
    try:
        deps.chain.head()
    except TornTailError as exc:
        return Condition("broken", "chain", str(exc))
    except ChainIOError as exc:  # StoreUnreachableError among them
        return Condition("unavailable", "store", str(exc))
    return None


def standing_conditions(deps: GateDeps) -> list[Condition] | None:
    """The conditions that halt verdicts now (empty: none); ``None`` if it cannot tell."""
    try:
        found = _store_condition(deps)
        if found is not None:
            return [found]
        outcome = usage(deps)
        if outcome.uncertainty is None:
            return []
        detail = outcome.diagnostic or outcome.uncertainty.value
        if outcome.uncertainty is Uncertainty.COUNTER_INCONSISTENT:
            # The store may have gone away between the two reads: say so, not "broken".
            again = _store_condition(deps)
            return [again or Condition("broken", "chain", detail)]
        return [Condition("uncertainty", "aggregate", f"{outcome.uncertainty.value}: {detail}")]
    except TornTailError as exc:
        return [Condition("broken", "chain", str(exc))]
    except ChainIOError as exc:
        return [Condition("unavailable", "store", str(exc))]
    except LockTimeoutError:
        return None
