"""``ledger explain VERDICT_REF``: why a sealed verdict came out as it did (SPEC §10).

From the chain alone: the verified entries before the verdict are folded (the
same ``fold_verified`` the gate uses), the scopes are rebuilt for the verdict's
day, provider and sealed time with the configuration in force now, and
``decide`` runs again. The fold starts from the nearest point of the derived
state kept before the verdict (``ledger.edges.files.statepoints``: one every
``POINT_EVERY`` entries, folded from the verified chain under the same keys,
budgets and day zone), found through the ref index, so explaining a verdict
folds and verifies at most that many entries whatever the chain's length;
without such a point (none kept, kept under other keys or budgets, or one the
chain no longer continues from) the chain is folded from line 1.

The explanation shows every cap's figures, every §4 row and the billing
readings; the recomputed verdict is compared with the sealed one, and any
difference is reported (the verdict was not reproducible: derived state, a
checkpoint or a configuration that differed then, or a damaged chain).
"""

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ledger.core.budget_state import budget_checks
from ledger.core.budgets import CallScope
from ledger.core.budgets import fingerprint as budgets_fingerprint
from ledger.core.chain import ChainVerifier
from ledger.core.envelope import ParsedEntry
from ledger.core.explain import RowCheck, first_match, pct_text, scope_figures, table_rows
from ledger.core.refs import FULL_REF_DIGITS
from ledger.core.sealed_config import with_sealed_caps
from ledger.core.spend import ScopeState, unpriced_problem
from ledger.core.state import apply_parsed, empty_state
from ledger.core.timefmt import budget_day, format_ts, parse_ts
from ledger.core.trust import trust_fingerprint
from ledger.core.verdict import decide
from ledger.errors import LedgerError, UsageError
from ledger.services.chain.counter import Counter, counter_problem
from ledger.services.chain.refs import describe, find_entries
from ledger.services.chain.schema_lookup import schema_lookup
from ledger.services.gate.gate import _scopes
from ledger.services.ports import CounterDeps

if TYPE_CHECKING:
    from ledger.core.config import Config

VERDICT_EVENTS = frozenset(
    {"budget.allow", "budget.warn_90", "budget.halt_100", "budget.halt_uncertainty"}
)
_COMPARED = (
    "verdict",
    "uncertainty_reason",
    "deciding_cap",
    "usage_pct",
    "usd_used_micros",
    "usd_reserved_micros",
    "cap_micros",
)


class ExplainDeps(CounterDeps, Protocol):
    """What explaining needs: the chain, its trust, its index and the configuration."""

    @property
    def config(self) -> "Config":
        """The configuration in force now."""
        ...


class UnknownVerdictError(LedgerError):
    """No verdict with that ref in the verified chain (exit 1)."""


@dataclass(frozen=True, slots=True)
class Explanation:
    """Everything ``explain`` prints."""

    verdict_ref: str
    line: int
    sealed: dict[str, Any]
    recomputed: dict[str, Any]
    differences: list[str]
    caps: list[dict[str, Any]]
    rows: list[RowCheck]
    readings: list[dict[str, Any]]
    context: dict[str, Any]

    @property
    def reproducible(self) -> bool:
        """Whether the recomputed verdict agrees with the sealed one."""
        return not self.differences

    def to_document(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "verdict_ref": self.verdict_ref,
            "line": self.line,
            **self.context,
            "reproducible": self.reproducible,
            "differences": self.differences,
            "sealed": self.sealed,
            "recomputed": self.recomputed,
            "caps": self.caps,
            "rows": [row._asdict() for row in self.rows],
            "billing_readings": self.readings,
        }


class AmbiguousRefError(UsageError):
    """A ref prefix matches more than one entry (exit 2: give more digits)."""


Found = tuple[dict[str, Any], ParsedEntry, int, str | None]


def _from_point(deps: ExplainDeps, ref: str) -> Found | None:
    """``_find`` for a whole ref, folding from the nearest state point; ``None``: none serves.

    The ref index names the entry's line; the point must have been folded under
    the trust store, budgets and day zone in force now, and the chain must go
    on from it (its next line links to the point's head) and reach the entry
    at that line. Anything else is left to the fold from line 1, which reports
    what it finds.
    """
    nearest = getattr(deps.states, "nearest_point", None)
    if nearest is None:
        return None
    try:
        indexed = find_entries(deps, ref, limit=1)
    except LedgerError:
        return None
    if len(indexed) != 1 or indexed[0].entry_hash != ref:
        return None
    point = nearest(indexed[0].line)
    if point is None:
        return None
    config, trust = deps.config, deps.keys.load_trust()
    meta = point.data.get("meta") or {}
    kept_for = (point.data.get("budgets") or {}).get("fingerprint")
    if (
        meta.get("trust") != trust_fingerprint(trust)
        or meta.get("day_zone") != config.day_timezone
        or kept_for != budgets_fingerprint(config.budgets)
    ):
        return None
    data = point.data
    schema_for = schema_lookup(deps)
    found: list[ParsedEntry] = []
    last_ts = [meta.get("last_ts")]

    def fold(parsed: ParsedEntry) -> None:
        if found:
            return
        if parsed.entry_hash == ref:
            found.append(parsed)
            return
        apply_parsed(data, parsed, schema_for, config.day_zone, config.budgets)
        last_ts[0] = parsed.ts_utc

    verifier = ChainVerifier(
        trust, expected_prev=point.head_hash, first_line=point.entries + 1, on_entry=fold
    )
    line = point.entries
    for raw in deps.chain.iter_lines(point.size):
        line += 1
        if not verifier.feed(raw) or found:
            break
    if not found or line != indexed[0].line:
        return None
    return data, found[0], line, last_ts[0]


def _find(deps: ExplainDeps, ref: str) -> Found:
    """Fold the verified chain up to the entry ``ref``; returns (state, entry, line, prev ts).

    ``ref`` is a whole entry hash or a prefix of one (``MIN_REF_PREFIX`` hex
    digits or more, as messages print them). A prefix is looked for in the
    whole verified chain, so one that names two entries is refused, never
    silently taken to mean the first.
    """
    if len(ref) == FULL_REF_DIGITS:
        started = _from_point(deps, ref)
        if started is not None:
            return started
    zone, budgets = deps.config.day_zone, deps.config.budgets
    data = empty_state(budgets)
    schema_for = schema_lookup(deps)
    found: list[tuple[ParsedEntry, int, str | None]] = []
    others: list[int] = []
    last_ts: list[str] = []
    current_line = [0]
    whole = len(ref) == FULL_REF_DIGITS

    def fold(parsed: ParsedEntry) -> None:
        if not parsed.entry_hash.startswith(ref):
            if not found:
                apply_parsed(data, parsed, schema_for, zone, budgets)
                last_ts[:] = [parsed.ts_utc]
            return
        if found:
            others.append(current_line[0])
        else:
            found.append((parsed, current_line[0], last_ts[0] if last_ts else None))

    verifier = ChainVerifier(deps.keys.load_trust(), on_entry=fold)
    for line, raw in enumerate(deps.chain.iter_lines(), start=1):
        current_line[0] = line
        if not verifier.feed(raw):
            if found:
                break  # past the entry: a later break is not this explanation's to report
            report = verifier.report()
            raise UnknownVerdictError(
                f"the chain does not verify at line {report.line} ({report.reason}) "
                f"before {ref} was found"
            )
        if found and (whole or others):
            break
    if others:
        lines = ", ".join(str(line) for line in (found[0][1], *others))
        raise AmbiguousRefError(
            f"VERDICT_REF: {ref} matches more than one entry (lines {lines}): give more digits"
        )
    if not found:
        raise UnknownVerdictError(f"no entry {ref} in the chain")
    entry, at_line, prev_ts = found[0]
    return data, entry, at_line, prev_ts


def _whole_ref(deps: ExplainDeps, ref: str) -> str:
    """The whole hash a ref names, found through the index (``ledger.services.chain.refs``).

    Raises:
        AmbiguousRefError: the prefix names more than one entry.
        UnknownVerdictError: no entry has that hash.
        ChainIOError: the chain cannot be read.
    """
    if len(ref) == FULL_REF_DIGITS:
        return ref
    found = find_entries(deps, ref)
    if len(found) > 1:
        raise AmbiguousRefError(
            f"VERDICT_REF: {ref} matches more than one entry (lines {describe(found)}): "
            "give more digits"
        )
    if not found:
        raise UnknownVerdictError(f"no entry {ref} in the chain")
    return found[0].entry_hash


def _reading(scope: ScopeState, now: dt.datetime, day: str, zone: dt.tzinfo) -> dict[str, Any]:
    reading = scope.reading
    if reading is None:
        return {"scope": scope.key, "reading": None}
    return {
        "scope": scope.key,
        "usd_used_micros": reading.usd_used_micros,
        "billing_ts": format_ts(reading.billing_ts),
        "fetched_at": format_ts(reading.fetched_at),
        "server_ts": None if reading.server_ts is None else format_ts(reading.server_ts),
        "age_seconds": round((now - reading.fetched_at).total_seconds(), 3),
        "counts_for_day": budget_day(reading.fetched_at, zone) == day,
    }


def explain(deps: ExplainDeps, ref: str) -> Explanation:
    """Recompute the verdict ``ref`` from the chain and compare it with what was sealed.

    Args:
        deps: the chain, its trust and the configuration.
        ref: the verdict's entry hash, or a prefix of it that names one entry.

    Raises:
        UnknownVerdictError: no such entry, not a verdict, or the chain breaks first.
        AmbiguousRefError: ``ref`` is a prefix of more than one entry's hash.
        ConfigError: the configuration is invalid or has no daily cap.
        ChainIOError: the chain cannot be read.
    """
    data, entry, line, prev_ts = _find(deps, _whole_ref(deps, ref))
    # The caps sealed by then (``config.changed``), when the chain holds them.
    config, sealed_caps = with_sealed_caps(deps.config, data)
    ref = entry.entry_hash  # a prefix names this entry
    if entry.event_type not in VERDICT_EVENTS:
        raise UnknownVerdictError(
            f"entry {ref} (line {line}) is a {entry.event_type}, not a verdict"
        )
    payload = entry.payload
    now = parse_ts(entry.ts_utc)
    local_now = parse_ts(payload["local_time"]) if payload.get("local_time") else now
    # The verdict's budget day, in the zone in force now (as the rest of the config).
    day = budget_day(now, config.day_zone)
    provider = payload.get("provider")
    estimate = int(payload["estimated_micros"])
    scopes = _scopes(data["usd"], config, provider, day, now)
    problem = counter_problem(Counter(data, None), config) or unpriced_problem(data["usd"], day)
    head_ts = parse_ts(prev_ts) if prev_ts else None
    checks = budget_checks(
        data.get("budgets"), config.budgets, CallScope.from_payload(payload), now,
        config.day_zone, config.warn_pct,
    )  # fmt: skip
    budget_scopes = [(check.scope, check.warn_pct) for check in checks]
    decision = decide(
        scopes, estimate, config, now, head_ts=head_ts, counter_problem=problem,
        local_now=local_now, budget_scopes=budget_scopes,
    )  # fmt: skip
    rows = table_rows(
        scopes, estimate, config, now, head_ts=head_ts, counter_problem=problem,
        local_now=local_now, budget_scopes=budget_scopes,
    )  # fmt: skip
    recomputed = {
        "verdict": decision.verdict.value,
        "uncertainty_reason": decision.reason.value if decision.reason else None,
        "deciding_cap": decision.deciding.key,
        "usage_pct": pct_text(decision.projected_pct),
        "usd_used_micros": decision.deciding.used_micros,
        "usd_reserved_micros": decision.deciding.reserved_micros,
        "cap_micros": decision.deciding.cap_micros,
        "diagnostic": decision.diagnostic,
        "deciding_row": first_match(rows).order,
    }
    sealed = {key: payload.get(key) for key in (*_COMPARED, "diagnostic")}
    differences = [
        f"{key}: sealed {sealed[key]!r}, recomputed {recomputed[key]!r}"
        for key in _COMPARED
        if sealed[key] != recomputed[key]
    ]
    context = {
        "event_type": entry.event_type,
        "ts_utc": entry.ts_utc,
        "utc_day": payload["utc_day"],
        "budget_day": day,
        "provider": provider,
        "estimated_micros": estimate,
        "config": "caps sealed in the chain" if sealed_caps else "in force now",
    }
    return Explanation(
        ref,
        line,
        sealed,
        recomputed,
        differences,
        [scope_figures(scope, estimate) for scope in scopes + [c.scope for c in checks]],
        rows,
        [_reading(scope, now, day, config.day_zone) for scope in scopes],
        context,
    )
