"""A Claude Code session's USD gate: a verdict before its next call, and whether it halts.

``session_verdict`` (PreToolUse, UserPromptSubmit) runs a USD verdict for the
session's next call, estimated at the mean cost of its recorded calls (at
least $0.01). Each admitted verdict's ref waits in the transcript's cursor and
is settled by the next call recorded (``ledger.services.agents.claude_spend``), so a
long session does not pile up reservations until their TTL.

``session_halt`` (PostToolUse, Stop) asks, writing nothing, whether the gate
halts already with nothing more spent: a cap, or a ``[[budgets]]`` budget that
applies to the session's next call (its session, agent and provider), is
reached, or the counter is uncertain. Every halt's message says what lifts it.
"""

from typing import Any, NamedTuple

from ledger.core.budget_state import BudgetCheck, window_frees
from ledger.core.budgets import CallScope
from ledger.core.hook_protocol import HookInput, clip, halt_lift, usd_verdict_reason
from ledger.core.refs import short_ref
from ledger.core.timefmt import format_ts
from ledger.core.transcript import MAX_PENDING, cursor_from, estimate_micros
from ledger.core.verdict_kind import Verdict
from ledger.errors import ConfigError, LedgerError
from ledger.services.agents.claude_spend import PROVIDER, SpendDeps
from ledger.services.gate import calls, figures
from ledger.services.gate.call_args import Micros

GATING_OFF = (
    "ledger: USD gating is off: no usd.daily_cap is configured (`ledger init --daily-cap-usd X` "
    "or LEDGER_USD_DAILY_CAP); this session's spend is recorded, not capped"
)


class SessionVerdict(NamedTuple):
    """The USD side of a hook's answer; ``halted``: the verdict itself halts the session."""

    deny: str | None = None
    warnings: tuple[str, ...] = ()
    entry_hash: str | None = None
    errors: tuple[str, ...] = ()
    halted: bool = False


def _cursor_key(hook: HookInput) -> str | None:
    if hook.transcript_path:
        return hook.transcript_path
    return f"session:{hook.session_id}" if hook.session_id else None


def _update_cursor(deps: SpendDeps, key: str, change: Any) -> None:
    store = deps.transcripts
    with store.locked(key):
        cursor = cursor_from(store.load_cursor(key))
        change(cursor)
        store.save_cursor(key, cursor)


def _session_figures(deps: SpendDeps, hook: HookInput, key: str | None) -> dict[str, Any]:
    """The session's cursor, its calls and cost summed with its subagents' (for the estimate)."""
    store = deps.transcripts
    cursor = cursor_from(store.load_cursor(key) if key else None)
    if hook.transcript_path:
        try:
            subagents = store.subagents(hook.transcript_path)
        except LedgerError:
            subagents = []  # the estimate then rests on the session's own calls
        for path in subagents:
            figures = cursor_from(store.load_cursor(path))
            cursor["calls"] += figures["calls"]
            cursor["micros"] += figures["micros"]
    return cursor


def halt_reason(deps: SpendDeps, verdict: Verdict, document: dict[str, Any], refused: str) -> str:
    """A halt verdict in words, with what will lift it."""
    config = deps.config
    lift = halt_lift(verdict, document, config.day_zone, config.day_timezone)
    return f"{usd_verdict_reason(verdict, document, refused)}; {lift}"


def session_verdict(
    deps: SpendDeps, hook: HookInput, agent: str | None, refused: str = "tool call refused"
) -> SessionVerdict:
    """A USD verdict for the session's next call (PreToolUse, UserPromptSubmit).

    ``halt-100`` and ``halt-uncertainty`` deny (and halt the session), ``warn-90``
    warns; ``refused`` names what a denial refuses. Without ``usd.daily_cap`` USD
    gating is off, which the first answer of a session says. Never raises a
    ``LedgerError``: a configuration or verdict that cannot be read denies
    (fail-closed).
    """
    key = _cursor_key(hook)
    try:
        cap = deps.config.daily_cap_micros
    except ConfigError as exc:
        reason = f"ledger: configuration error ({exc}); {refused} (fail-closed)"
        return SessionVerdict(deny=reason, errors=(str(exc),))
    if cap is None:
        return _gating_off(deps, key)
    try:
        document, admitted = calls.verdict(
            deps, Micros(estimate_micros(_session_figures(deps, hook, key))), PROVIDER,
            cycle_id=clip(hook.session_id), agent=agent,
        )  # fmt: skip
    except LedgerError as exc:
        reason = f"ledger: USD verdict failed ({exc}); {refused} (fail-closed)"
        return SessionVerdict(deny=reason, errors=(f"USD verdict failed: {exc}",))
    errors: tuple[str, ...] = ()
    if document.get("recording_error"):
        errors = (f"verdict not recorded: {document['recording_error']}",)
    ref = document.get("verdict_ref")
    if admitted and key is not None and isinstance(ref, str):
        try:
            _update_cursor(
                deps, key, lambda c: c.update(pending=[*c["pending"], ref][-MAX_PENDING:])
            )
        except LedgerError as exc:  # the reservation then expires by its TTL
            errors = (*errors, f"cannot remember verdict {short_ref(ref)} for settling: {exc}")
    verdict = Verdict.read(document.get("verdict"))
    if verdict.halts:
        reason = halt_reason(deps, verdict, document, refused)
        return SessionVerdict(reason, (), ref, errors, halted=True)
    warnings = (usd_verdict_reason(verdict, document),) if verdict is Verdict.WARN_90 else ()
    return SessionVerdict(None, warnings, ref, errors)


def release_session(deps: SpendDeps, hook: HookInput) -> tuple[str, ...]:
    """Settle the session's open verdicts at $0: it stopped, so no call will settle them.

    Each is a $0 record under ``cc:release:<ref>`` (run again, a duplicate).
    Returns problems for stderr; a reservation that cannot be released expires
    by its TTL.
    """
    key = _cursor_key(hook)
    if key is None:
        return ()
    taken: list[str] = []

    def take(cursor: dict[str, Any]) -> None:
        taken.extend(cursor["pending"])
        cursor["pending"] = []

    try:
        _update_cursor(deps, key, take)
    except LedgerError as exc:
        return (f"cannot release the session's reservations: {exc}",)
    problems: list[str] = []
    for ref in taken:
        try:
            calls.record(
                deps, "0", PROVIDER, verdict_ref=ref, cycle_id=clip(hook.session_id),
                idempotency_key_value=f"cc:release:{ref}",
            )  # fmt: skip
        except LedgerError as exc:
            problems.append(f"cannot release verdict {short_ref(ref)}: {exc}")
    return tuple(problems)


def _gating_off(deps: SpendDeps, key: str | None) -> SessionVerdict:
    """Say once per session (when it can be remembered) that USD gating is off."""
    if key is None:
        return SessionVerdict(warnings=(GATING_OFF,))
    noted: list[bool] = []

    def note(cursor: dict[str, Any]) -> None:
        noted.append(cursor["gating_off_noted"])
        cursor["gating_off_noted"] = True

    try:
        _update_cursor(deps, key, note)
    except LedgerError as exc:
        return SessionVerdict(warnings=(GATING_OFF,), errors=(str(exc),))
    return SessionVerdict(warnings=() if noted[0] else (GATING_OFF,))


def _budget_entry(check: BudgetCheck, state: dict[str, Any] | None) -> dict[str, Any]:
    """The deciding budget as a verdict lists it, with when a rolling window frees enough."""
    figures, scope = check.figures, check.scope
    entry: dict[str, Any] = {
        "name": figures.found.budget.name,
        "per_value": figures.found.per_value,
        "period": figures.found.budget.period,
        "period_end": format_ts(figures.period_end),
    }
    excess = scope.used_micros + scope.reserved_micros - scope.cap_micros
    if state is not None and scope.cap_micros > 0:
        # Under the cap again once more than the excess has left the window.
        frees = window_frees(state, figures, excess + 1)
        if frees is not None:
            entry["lifts_at"] = format_ts(frees)
    return entry


def session_halt(
    deps: SpendDeps, hook: HookInput, agent: str | None, refused: str = "session stopped"
) -> str | None:
    """Why the session must stop now (the gate halts with $0 more), or ``None``.

    Checks the caps and every budget that applies to the session's next call,
    matched as its verdict is (``cycle_id`` the session id, ``agent``, provider
    ``anthropic``). Writes nothing. Without ``usd.daily_cap`` nothing halts
    here; a gate that cannot be read halts (fail-closed).
    """
    call = CallScope(PROVIDER, agent, None, clip(hook.session_id))
    try:
        if deps.config.daily_cap_micros is None:
            return None
        outcome = figures.usage(deps, PROVIDER, call)
    except LedgerError as exc:
        return f"ledger: the USD budget cannot be read ({exc}); {refused} (fail-closed)"
    if outcome.verdict is None or not outcome.verdict.halts:
        return None
    scope = outcome.deciding or outcome.aggregate
    document: dict[str, Any] = {
        "verdict": outcome.verdict.value,
        "uncertainty_reason": None if outcome.uncertainty is None else outcome.uncertainty.value,
        "diagnostic": outcome.diagnostic,
        "utc_day": outcome.utc_day,
        "budget_day": outcome.budget_day,
        "deciding_cap": scope.key,
        "daily_cap_micros": scope.cap_micros,
        "usd_used_micros": scope.used_micros,
        "usd_reserved_micros": scope.reserved_micros,
        "estimated_micros": 0,
    }
    deciding = [check for check in outcome.budgets if check.scope.key == scope.key]
    if deciding:
        document["budgets"] = [_budget_entry(deciding[0], outcome.budget_state)]
    return halt_reason(deps, outcome.verdict, document, refused)
