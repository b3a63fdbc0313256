"""The rollups' fold: verified entries into cells, quarter-hour marks and the calls table.

``rollups`` drives it (from the saved position to the head, in one
transaction); each entry is checked as the gate checks it before it counts.
"""

from typing import TYPE_CHECKING, Any

from ledger.core.budget_facts import NO_FACTS, FactsFold
from ledger.core.envelope import GENESIS
from ledger.core.foldable import IGNORED, Foldable, check_entry
from ledger.core.rollups import CellKey, add, cell_of, slot_of
from ledger.core.state import OPERATOR_RESETS
from ledger.core.timefmt import parse_ts
from ledger.services.ports import Head
from ledger.services.views.calls import (
    RECORD_EVENT,
    VERDICT_EVENTS,
    event_of_entry,
    row_of_record,
    settle,
)
from ledger.services.views.rollup_ports import RollupDeps, RollupTx

if TYPE_CHECKING:
    from ledger.core.envelope import ParsedEntry
    from ledger.core.foldable import SchemaFor
    from ledger.core.trust import TrustStore

_COUNTED = frozenset({"budget.record_call", "budget.halt_100", "budget.halt_uncertainty"})
_CALL_EVENTS = frozenset({*VERDICT_EVENTS, RECORD_EVENT})
_FROM_VERDICT = (("agent", "agent"), ("cycle_id", "session"), ("key", "key"),
                 ("tags", "tags"), ("client", "client"), ("model_id", "model"))  # fmt: skip
_CALLS_PER_WRITE = 5000  # events held in memory before they go to the calls table
_UNREADABLE = (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError)


class Fold:
    """Folds verified entries into cells, slot marks and the calls table."""

    def __init__(
        self,
        tx: RollupTx,
        schema_for: "SchemaFor",
        last_slot: int,
        checkpoint_at: int | None,
        facts: dict[str, Any] | None = None,
    ) -> None:
        self.tx = tx
        # The budget facts' totals as stored, and the fold of what is new.
        self.facts_totals = dict(facts or NO_FACTS)
        self.facts = FactsFold(self.facts_totals["max_ts"], tx.budget_facts.find_pending)
        self.events: list[dict[str, Any]] = []
        # The verdicts among ``events`` by ref (a record takes missing values from its verdict).
        self.verdicts: dict[str, dict[str, Any]] = {}
        self.schema_for = schema_for
        self.cells: dict[CellKey, list[int]] = {}
        self.marks: dict[int, list[Any]] = {}
        self.last_slot = last_slot
        self.checkpoint_at = checkpoint_at
        self.checkpoint_hash: str | None = None
        # The position before the entry being folded (set by the reader).
        self.entries, self.size, self.prev = 0, 0, GENESIS
        self.current = GENESIS
        self.broken: tuple[int, str] | None = None

    def __call__(self, parsed: "ParsedEntry") -> None:
        """One verified entry (the verifier's ``on_entry``)."""
        self.current = parsed.entry_hash
        moment = parse_ts(parsed.ts_utc)
        slot = slot_of(moment)
        if slot > self.last_slot:
            self.marks[slot] = [self.entries, self.size, self.prev]
            self.last_slot = slot
        if self.entries + 1 == self.checkpoint_at:
            self.checkpoint_hash = parsed.entry_hash
        event = None
        if parsed.event_type in _CALL_EVENTS:
            event = event_of_entry(self.entries + 1, parsed)
        budget = parsed.event_type.startswith("budget.") or parsed.event_type in OPERATOR_RESETS
        if budget or parsed.event_type in _COUNTED:
            try:
                checked: Foldable | str = check_entry(
                    parsed.event_type, parsed.ts_utc, parsed.payload, self.schema_for
                )
            except _UNREADABLE:
                checked = "unreadable"
            if budget and checked != IGNORED:
                self.facts.feed(
                    self.entries + 1, parsed.event_type, parsed.ts_utc,
                    checked.payload if isinstance(checked, Foldable) else None,
                    parsed.entry_hash,
                )  # fmt: skip
            if parsed.event_type in _COUNTED and isinstance(checked, Foldable) and checked.payload:
                payload = checked.payload
                if parsed.event_type == RECORD_EVENT:
                    payload = self._with_verdict_values(payload)
                found = cell_of(parsed.event_type, moment, payload)
                if found is not None:
                    add(self.cells, *found)
        if event is not None:
            self.events.append(event)
            if event["kind"] == "verdict":
                self.verdicts[str(event["verdict_ref"])] = event
            if len(self.events) >= _CALLS_PER_WRITE:
                self.write_calls()

    def _with_verdict_values(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A record's payload with the values it names none of taken from its verdict.

        A record's own values win (SPEC §19); one sealed by the gateway names no
        client, and a ``ledger record --verdict-ref`` may name no agent or key.
        """
        ref = payload.get("verdict_ref")
        if not isinstance(ref, str):
            return payload
        verdict = self.verdicts.get(ref) or self.tx.calls.by_ref(ref)
        if verdict is None or verdict.get("verdict") is None:
            return payload  # no verdict, or the row of a record sealed without one
        filled = dict(payload)
        for field, name in _FROM_VERDICT:
            if not filled.get(field) and verdict.get(name):
                filled[field] = verdict[name]
        return filled

    def write_calls(self) -> None:
        """Join the events folded so far into the calls table (a record to its verdict's row)."""
        changed: dict[str, dict[str, Any]] = {}
        for event in self.events:
            if event["kind"] == "verdict":
                row = {key: value for key, value in event.items() if key != "kind"}
                changed[str(row["verdict_ref"])] = row
                continue
            ref = str(event["verdict_ref"])
            found = changed.get(ref) or self.tx.calls.by_ref(ref)
            row = found if found is not None else row_of_record(event)
            settle(row, event)
            changed[str(row["verdict_ref"])] = row
        self.tx.calls.put(list(changed.values()))
        self.events = []
        self.verdicts = {}
        self.facts_totals = self.tx.budget_facts.write(self.facts, self.facts_totals)


def fold_range(
    deps: RollupDeps,
    trust: "TrustStore",
    start: dict[str, Any],
    head: Head,
    fold: Fold,
    limit: int | None = None,
) -> bool:
    """Verify and fold the chain from ``start`` to ``head`` (at most ``limit`` lines).

    Returns whether what was read verified; ``fold.size`` says where it stopped.
    """
    from ledger.core.chain import ChainVerifier
    from ledger.services.chain.sealed_here import sealed_here

    fold.entries, fold.size = int(start["entries"]), int(start["size"])
    fold.prev = start["head_hash"] or GENESIS
    verifier = ChainVerifier(
        trust,
        expected_prev=fold.prev,
        first_line=fold.entries + 1,
        on_entry=fold,
        vouched=sealed_here,  # this process's own lines: their signatures were just made here
    )
    for lines, raw in enumerate(deps.chain.iter_lines(fold.size, head.size), start=1):
        if not verifier.feed(raw):
            break
        fold.entries += 1
        fold.size += len(raw)
        fold.prev = fold.current
        if lines == limit:
            break
    report = verifier.report()
    if not report.ok:
        fold.broken = (report.line or 0, report.reason or "does not verify")
    return report.ok
