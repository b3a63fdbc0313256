"""Changed budget definitions counted afresh before the chain lock is taken (SPEC §21).

A verdict that finds the stored state kept for other ``[[budgets]]``
definitions counts the budgets over their current periods
(``budget_refold``): for a month's budget on a busy home, a month of
entries. Done while holding the chain lock, every other verdict would wait
for it, and one that waited too long would be refused. So it is done first,
without the lock: the stored state's prefix of the chain is append-only, so
the budgets counted over it stay right while others append. One process
counts at a time (``restating``: a lock of the derived state's own, never the
chain's); the others wait for it and then find nothing to count. Then, a moment
under the lock, the restated state is saved, if the stored state is still the
one restated (else someone saved meanwhile, and the verdict's own load counts
whatever is still to count, as before). The verdict that follows finds its
budgets' counters kept for its definitions and folds only the entries since.

Whatever fails here is left to the verdict's own load, which fails closed.
"""

import contextlib
from typing import TYPE_CHECKING

from ledger.core.budgets import fingerprint as budgets_fingerprint
from ledger.core.trust import trust_fingerprint
from ledger.errors import LedgerError
from ledger.services.chain.budget_recount import restated, stored_head
from ledger.services.chain.counter import Counter
from ledger.services.chain.state import save_counter

if TYPE_CHECKING:
    from ledger.core.config import Config
    from ledger.services.ports import CounterDeps, StoredStateLike

# The configuration whose budgets were last found kept for it, by identity: a
# long-lived gate keeps one Config across its verdicts, and checks it once.
_KEPT_FOR: list["Config"] = []


def _kept_for(stored: "StoredStateLike") -> object:
    return (stored.data.get("budgets") or {}).get("fingerprint")


def restate_budgets_unlocked(deps: "CounterDeps") -> int | None:
    """Count changed budgets afresh without the chain lock; entries folded, or ``None``.

    ``None`` when there was nothing to do here (the budgets are kept for the
    definitions in force, there is no stored state, or it is to be rebuilt
    anyway) or it could not be done (the verdict's load then counts them).
    """
    config = deps.config
    if _KEPT_FOR and _KEPT_FOR[0] is config:
        return None
    restating = getattr(deps.states, "restating", None)
    try:
        if _kept_for_now(deps, config):
            return None
        # One process counts; the others wait for it (without the chain lock)
        # and then find the budgets kept for their definitions.
        with restating() if restating is not None else contextlib.nullcontext():
            return _restate(deps, config)
    except LedgerError:
        return None


def _kept_for_now(deps: "CounterDeps", config: "Config") -> bool:
    """Whether there is nothing to count: no stored state, or its budgets are ``config``'s.

    Raises:
        LedgerError: the state cannot be read.
    """
    stored = deps.states.load()
    if stored is None or _kept_for(stored) == budgets_fingerprint(config.budgets):
        _KEPT_FOR[:] = [config]
        return True
    return False


def _restate(deps: "CounterDeps", config: "Config") -> int | None:
    """``restate_budgets_unlocked`` once no other process is counting them.

    Raises:
        LedgerError: the state or the chain cannot be read or written.
    """
    wanted = budgets_fingerprint(config.budgets)
    stored = deps.states.load()
    if stored is None or stored.head_hash is None or _kept_for(stored) == wanted:
        _KEPT_FOR[:] = [config]
        return None
    meta = stored.data["meta"]
    if (
        meta.get("trust") != trust_fingerprint(deps.keys.load_trust())
        or meta.get("day_zone") != config.day_timezone
        or not getattr(stored, "index_complete", True)
    ):
        return None  # rebuilt from line 1 by the verdict's load
    fresh, folded = restated(stored, deps, config.budgets, config.day_zone)
    if fresh is None or folded is None or not isinstance(meta.get("last_ts"), str):
        return None
    with deps.chain.transaction():
        again = deps.states.load()
        if again is None or (again.head_hash, again.size, _kept_for(again)) != (
            stored.head_hash, stored.size, _kept_for(stored),
        ):  # fmt: skip
            return None
        head = stored_head(stored)
        save_counter(Counter(fresh.data, head, dirty=True, refolded=folded), deps.states)
    return folded
