"""Loading the derived counter state under the chain lock, and keeping it current.

On every use the stored state is checked against the chain head: equal means
trusted; behind means the missing tail is verified and folded in; anything
else means the counter cannot be trusted (SPEC §4 row 1). A missing state is
rebuilt from the verified chain.
"""

import contextlib
import copy
import datetime as dt
from typing import TYPE_CHECKING, Any

from ledger.core.budget_counters import counters_damage, read_counters
from ledger.core.budget_state import empty_budget_state
from ledger.core.budgets import Applicable, Budget
from ledger.core.budgets import fingerprint as budgets_fingerprint
from ledger.core.envelope import GENESIS
from ledger.core.seal import SealedEntry
from ledger.core.state import (
    FINDING_KEY,
    apply_entry,
    apply_parsed,
    empty_state,
)
from ledger.core.trust import trust_fingerprint
from ledger.errors import ChainIOError, InputDataError, LedgerError, StateMismatchError
from ledger.services.chain.budget_recount import restated
from ledger.services.chain.counter import (
    Counter,
    checkpoint_problem,
    held_against_checkpoint,
    mismatch,
)
from ledger.services.chain.key_records import PackedRefs, index_entry
from ledger.services.chain.requests import (
    AlreadyAnsweredError,
    RequestScope,
    current_request,
)
from ledger.services.chain.schema_lookup import no_schemas, schema_lookup
from ledger.services.ports import ChainStore, ChainTx, CounterDeps, Head, StateStore

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ledger.core.envelope import ParsedEntry
    from ledger.core.foldable import SchemaFor
    from ledger.core.trust import TrustStore

    KeepPointFn = Callable[[int, int, str, dict[str, Any]], object]
    SpillFn = Callable[[list[dict[str, Any]], PackedRefs], None]


# Entries folded between two points of the derived state kept for ``explain``
# (``ledger.edges.files.statepoints``): what explaining any verdict folds at most.
POINT_EVERY = 10_000
# Entries whose index records a fold into a state built aside holds before
# writing them out (``spill``): its memory stays flat whatever the chain's length.
SPILL_EVERY = 5_000


def _fold_range(
    store: ChainStore,
    data: dict[str, Any],
    trust: "TrustStore",
    start: int,
    end: int,
    expected_prev: str,
    first_line: int = 1,
    remember: tuple[int, dict[int, str]] | None = None,
    keys: list[dict[str, Any]] | None = None,
    refs: PackedRefs | None = None,
    schema_for: "SchemaFor | None" = None,
    zone: dt.tzinfo = dt.UTC,
    budgets: tuple[Budget, ...] = (),
    keep: "KeepPointFn | None" = None,
    spill: "SpillFn | None" = None,
) -> str | None:
    from ledger.core.chain import ChainVerifier  # only a lagging or missing state needs it

    if schema_for is None:
        schema_for = no_schemas

    offset = [start]  # the byte offset of the line being fed
    last_hash = [expected_prev]

    def fold(parsed: "ParsedEntry") -> None:
        apply_parsed(data, parsed, schema_for, zone, budgets)
        last_hash[0] = parsed.entry_hash
        number = data["meta"]["entries"]
        if remember is not None and number == remember[0]:
            remember[1][remember[0]] = parsed.entry_hash
        if keys is not None:
            index_entry(
                keys, refs, parsed.event_type, parsed.payload, parsed.entry_hash, number,
                parsed.ts_utc, offset[0],
            )  # fmt: skip
            if spill is not None and refs is not None and len(refs) >= SPILL_EVERY:
                spill(keys, refs)
                keys.clear()
                refs.clear()

    verifier = ChainVerifier(
        trust, expected_prev=expected_prev, first_line=first_line, on_entry=fold
    )
    for raw in store.iter_lines(start, end):
        if not verifier.feed(raw):
            break
        offset[0] += len(raw)
        if keep is not None and data["meta"]["entries"] % POINT_EVERY == 0 and raw[:1] != b"[":
            keep(int(data["meta"]["entries"]), offset[0], last_hash[0], data)
    report = verifier.report()
    if report.ok:
        return None
    where = "" if start == 0 else " after the derived state's head"
    return (
        f"chain does not verify{where}: line {report.line}: {report.reason}; run `ledger recover`"
    )


def load_counter(tx: ChainTx, deps: CounterDeps, touching: "Sequence[Applicable]" = ()) -> Counter:
    """The counter state matching the chain head, or one marked untrustworthy.

    ``touching`` are the budgets (and ``per`` values) the caller will read: their
    counters are read here, so damage to them is found before anything is decided.
    A budget's counters that lost records (a power loss cut their bucket) are
    rebuilt from the chain; one whose record was edited halts until
    ``rebuild-state``, as an edited state file does.

    Never raises for a damaged chain or state: the damage becomes ``problem``.
    A missing state is rebuilt from the chain, which must verify and must still
    hold everything its newest checkpoint vouches for: without that check a cut
    chain plus a deleted state file would quietly forget spend. A state folded
    under another ``usd.day_timezone`` (or before the zone was remembered) is
    rebuilt too: its days are keyed in that zone. So is a state whose budget
    counters were kept for other ``[[budgets]]`` definitions: a changed budget
    is counted afresh from the chain, never from counters kept for another.

    Inside a served request (``ledger.services.chain.requests``) the counter is
    first asked whether another run already sealed the request.

    Raises:
        ConfigError: the configuration is invalid.
        AlreadyAnsweredError: the served request running now was sealed by
            another run; nothing may be written for it.
    """
    config = deps.config
    counter = _load_counter(tx, deps, config.day_zone, config.day_timezone, config.budgets)
    damage = _counters_damage(counter, touching)
    if damage is not None and damage[1]:
        counter = _load_counter(
            tx, deps, config.day_zone, config.day_timezone, config.budgets, afresh=True
        )
    elif damage is not None:
        counter = Counter(empty_state(), counter.head, f"{damage[0]}; run `ledger rebuild-state`")
    counter.zone = config.day_zone
    counter.budgets = config.budgets
    request = current_request()
    if request is not None and request.stop_when_answered:
        _stop_if_answered(counter, deps, request)
    return counter


def _counters_damage(counter: Counter, touching: "Sequence[Applicable]") -> tuple[str, bool] | None:
    """What the budgets' stored counters this load read (and those ``touching``) found wrong."""
    if counter.problem is not None:
        return None
    budgets = counter.data.get("budgets")
    read_counters(budgets, touching)
    return counters_damage(budgets)


def _stop_if_answered(counter: Counter, deps: CounterDeps, request: RequestScope) -> None:
    """Stop a served request another run already sealed (checked under the chain lock).

    Raises:
        AlreadyAnsweredError: the request id is in the chain, sealed by another run.
    """
    from ledger.services.chain.idempotency import find_indexed

    found = find_indexed(counter, deps, request.index_key)
    if found is not None and found.get("entry_hash") not in request.sealed:
        raise AlreadyAnsweredError(found)


def _load_counter(
    tx: ChainTx,
    deps: CounterDeps,
    zone: dt.tzinfo,
    zone_name: str,
    budgets: tuple[Budget, ...],
    *,
    afresh: bool = False,
) -> Counter:
    store, states, trust = deps.chain, deps.states, deps.keys.load_trust
    try:
        head = tx.head()
    except ChainIOError as exc:
        return Counter(empty_state(), None, str(exc))
    try:
        stored = states.load()
    except StateMismatchError as exc:
        return Counter(empty_state(), head, f"{exc}; run `ledger rebuild-state`")
    # A full verification's finding survives every rebuild; only recover clears it.
    finding = None if stored is None else stored.data["meta"].get(FINDING_KEY)
    try:
        fingerprint = trust_fingerprint(trust())
        if stored is not None and stored.data["meta"].get("trust") != fingerprint:
            # Verified under another trust store (a revocation, a rotation, an
            # edit): every entry is verified again before the next decision.
            stored = None
        if afresh or (stored is not None and not getattr(stored, "index_complete", True)):
            # Its counters lost records, or it was saved before the key index
            # recorded its sizes: the whole state is folded again.
            stored = None
        if stored is not None and stored.data["meta"].get("day_zone") != zone_name:
            # Folded with its days in another zone: every day is keyed afresh.
            stored = None
        if stored is not None and "budgets" not in stored.data and not budgets:
            # Kept before budgets existed, and none are defined: nothing to count.
            stored.data["budgets"] = empty_budget_state()
        kept_for = (stored.data.get("budgets") or {}).get("fingerprint") if stored else None
        refolded: int | None = None
        if stored is not None and kept_for != budgets_fingerprint(budgets):
            # Kept for other budget definitions: the budgets are counted afresh
            # over their current periods; the rest of the state still holds.
            stored, refolded = restated(stored, deps, budgets, zone)
        if stored is None:
            return _rebuilt(deps, head, budgets, zone, zone_name, fingerprint, finding)
        if head is None:
            if stored.head_hash is None:
                return Counter(stored.data, None)
            return Counter(empty_state(), None, mismatch())
        if stored.size == head.size and stored.head_hash == head.entry_hash:
            same = Counter(stored.data, head, dirty=refolded is not None, refolded=refolded)
            return held_against_checkpoint(same, deps)
        if stored.size < head.size and stored.head_hash is not None:
            data = copy.deepcopy(stored.data)
            # Line numbers count from the top of the chain, as verify-chain's do
            # (our own writer never writes markers, so entries equal lines).
            first_line = int(stored.data["meta"]["entries"]) + 1
            keys: list[dict[str, Any]] = []
            refs = PackedRefs()
            problem = _fold_range(
                store, data, trust(), stored.size, head.size, stored.head_hash, first_line,
                keys=keys, refs=refs, schema_for=schema_lookup(deps), zone=zone, budgets=budgets,
                keep=_point_keeper(deps, {}),
            )  # fmt: skip
            if problem:
                return Counter(data, head, problem)
            caught_up = Counter(
                data, head, None, dirty=True, new_keys=keys, new_refs=refs, refolded=refolded
            )
            return held_against_checkpoint(caught_up, deps)
    except (InputDataError, ChainIOError) as exc:
        return Counter(empty_state(), head, f"cannot verify the chain: {exc}")
    return Counter(empty_state(), head, mismatch())


def _rebuilt(
    deps: CounterDeps,
    head: Head | None,
    budgets: tuple[Budget, ...],
    zone: dt.tzinfo,
    zone_name: str,
    fingerprint: str,
    finding: Any,
) -> Counter:
    """The state folded afresh from the verified chain, held against the newest checkpoint.

    Raises:
        InputDataError, ChainIOError: the chain or the checkpoint cannot be read.
    """
    store, trust = deps.chain, deps.keys.load_trust
    data = empty_state(budgets)
    checkpoint = deps.newest_checkpoint()
    hashes: dict[int, str] = {}
    keys: list[dict[str, Any]] = []
    refs = PackedRefs()
    # The state's index takes the fold's records as they come (the live one's as
    # the one ``rebuild-state`` builds aside), so they are never all held at
    # once; the first batch replaces the index.
    aside = getattr(deps.states, "spill", None)
    spilled = [False]
    spill: SpillFn | None = None
    if aside is not None:
        write = aside

        def spill(batch: list[dict[str, Any]], batch_refs: PackedRefs) -> None:
            write(batch, batch_refs, replace=not spilled[0])
            spilled[0] = True

    if head is not None:
        problem = _fold_range(
            store, data, trust(), 0, head.size, GENESIS,
            remember=(checkpoint.entries, hashes) if checkpoint else None, keys=keys,
            refs=refs, schema_for=schema_lookup(deps), zone=zone, budgets=budgets,
            keep=_point_keeper(deps, {"trust": fingerprint, "day_zone": zone_name}),
            spill=spill,
        )  # fmt: skip
        if problem:
            return Counter(data, head, problem)
    if checkpoint is not None:
        problem = checkpoint_problem(data, head, checkpoint, hashes, trust())
        if problem:
            return Counter(data, head, problem + "; run `ledger recover`")
        data["meta"]["checkpoint"] = [checkpoint.entries, checkpoint.head_hash]
    data["meta"]["trust"] = fingerprint
    data["meta"]["day_zone"] = zone_name
    if finding is not None:
        data["meta"][FINDING_KEY] = finding
    # Once a batch was spilled the index was replaced then: the rest is added to it.
    rebuilt = not spilled[0]
    return Counter(data, head, None, dirty=True, new_keys=keys, new_refs=refs, rebuilt=rebuilt)


def _point_keeper(deps: CounterDeps, meta: dict[str, Any]) -> "KeepPointFn | None":
    """What keeps a point of a fold (``meta``: what the state will know once folded)."""
    keep_point = getattr(deps.states, "keep_point", None)
    if keep_point is None:
        return None

    def keep(entries: int, size: int, head_hash: str, data: dict[str, Any]) -> object:
        kept = {**data, "meta": {**data["meta"], **meta}}
        return keep_point(entries, size, head_hash, kept)

    return keep


def fold_sealed(counter: Counter, sealed: SealedEntry, head: Head | None) -> None:
    """Fold an entry this process just appended (already trusted: we sealed it).

    An untrusted counter is not folded (it is never saved); only the entry's
    idempotency key is noted, so a repeat is still found in the chain.
    """
    entry = sealed.entry
    if counter.problem is None:
        apply_entry(
            counter.data, entry["event_type"], sealed.ts_utc, entry["payload"], sealed.entry_hash,
            counter.zone, counter.budgets,
        )  # fmt: skip
        number = int(counter.data["meta"]["entries"])
        if number % POINT_EVERY == 0:
            counter.point_due = True
    else:
        number = 0  # unknown here: lookups on an untrusted counter search the chain
    offset = None if head is None else head.size - len(sealed.line)
    index_entry(
        counter.new_keys, counter.new_refs, entry["event_type"], entry["payload"],
        sealed.entry_hash, number, sealed.ts_utc, offset,
    )  # fmt: skip
    counter.head = head
    counter.dirty = True


def save_counter(counter: Counter, states: StateStore) -> None:
    """Store the counter if it changed and is trustworthy.

    The state is a cache: when it cannot be written (a full disk) the old file
    stays, lags the chain, and is caught up on the next call. The entry already
    appended is what counts, so the caller's call still succeeded.
    """
    if counter.problem is None and counter.dirty:
        if counters_damage(counter.data.get("budgets")) is not None:
            # A counter read after the decision was damaged: nothing is saved,
            # and the state is dropped, so the next use folds the chain afresh.
            with contextlib.suppress(LedgerError):
                states.delete()
            return
        head = counter.head
        try:
            if counter.new_keys or counter.new_refs or counter.rebuilt:
                states.save_keys(counter.new_keys, replace=counter.rebuilt, refs=counter.new_refs)
                counter.new_keys = []
                counter.new_refs = PackedRefs()
                counter.rebuilt = False
            states.save_state(
                head.entry_hash if head else None, head.size if head else 0, counter.data
            )
        except ChainIOError:
            return
        counter.dirty = False
        keep_point = getattr(states, "keep_point", None)
        if counter.point_due and head is not None and keep_point is not None:
            counter.point_due = False
            keep_point(int(counter.data["meta"]["entries"]), head.size, head.entry_hash,
                       counter.data)  # fmt: skip
