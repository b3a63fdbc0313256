"""Convoy token budgets (seed 003): check and reserve before a call, record after.

A hard budget: an untrusted counter, an unknown convoy or an unrecordable
check refuses (fail-closed).
"""

import datetime as dt
from fractions import Fraction
from typing import Any, NamedTuple

from ledger.core.agents import tokens as agent_tokens
from ledger.core.agents.ids import UnknownBudgetError, display_number, pct_value
from ledger.core.agents.tokens import TokenReason
from ledger.core.refs import short_ref
from ledger.core.timefmt import format_ts
from ledger.errors import (
    ChainIOError,
    ClockRangeError,
    InputDataError,
    LockTimeoutError,
    UsageError,
)
from ledger.services.agents import clip
from ledger.services.agents.session import AgentDeps, AgentSession, agent_session
from ledger.services.chain.idempotency import find_duplicate, remember_keys_untrusted


def tokens_create(
    deps: AgentDeps, convoy: str, convoy_max: int, agent_max: int, warn_pct: str
) -> dict[str, Any]:
    """Create a convoy budget.

    Raises:
        UsageError: the convoy already has a budget (delete it first).
    """
    with agent_session(deps) as session:
        if convoy in session.agents["convoys"]:
            raise UsageError(
                f"convoy {convoy} already has a token budget; `ledger tokens delete {convoy}` first"
            )
        payload = {
            "convoy": convoy,
            "convoy_max_tokens": convoy_max,
            "agent_max_tokens": agent_max,
            "warn_pct": warn_pct,
        }
        sealed = session.append("tokens.budget_created", payload)
    return {
        "created": True,
        "convoy": convoy,
        "convoy_max_tokens": convoy_max,
        "agent_max_tokens": agent_max,
        "warn_pct": display_number(pct_value(warn_pct)),
        "entry_hash": sealed.entry_hash,
    }


def tokens_delete(deps: AgentDeps, convoy: str) -> dict[str, Any]:
    """Delete a convoy budget (a no-op for an unknown convoy, as the seed)."""
    with agent_session(deps) as session:
        if convoy not in session.agents["convoys"]:
            return {"deleted": False, "convoy": convoy, "entry_hash": None}
        sealed = session.append("tokens.budget_deleted", {"convoy": convoy})
    return {"deleted": True, "convoy": convoy, "entry_hash": sealed.entry_hash}


def tokens_list(deps: AgentDeps) -> dict[str, Any]:
    """Every convoy budget with its totals (read-only)."""
    with agent_session(deps, write=False) as session:
        convoys = session.agents["convoys"]
        rows = []
        for name in sorted(convoys):
            report = agent_tokens.convoy_report(name, convoys[name], session.now_ts)
            rows.append({key: report[key] for key in _LIST_FIELDS})
        return {"convoys": rows, "diagnostic": session.problem}


_LIST_FIELDS = (
    "convoy", "max_allowed", "agent_max_tokens", "warn_pct", "total_consumed",
    "reserved_tokens", "percent_used", "warning_active", "budget_exhausted",
)  # fmt: skip


def tokens_report(deps: AgentDeps, convoy: str) -> dict[str, Any]:
    """Seed 003's budget report for one convoy (read-only).

    Raises:
        UnknownBudgetError: no such convoy.
    """
    with agent_session(deps, write=False) as session:
        state = session.agents["convoys"].get(convoy)
        if state is None:
            raise UnknownBudgetError(f"no token budget for convoy {convoy}")
        report = agent_tokens.convoy_report(convoy, state, session.now_ts)
        report["diagnostic"] = session.problem
        return report


class TokenCheck(NamedTuple):
    """The answer to ``tokens check`` and how it was recorded."""

    allowed: bool
    reason: TokenReason
    check_ref: str | None
    remaining_tokens: int | None
    usage_pct: Fraction | None
    agent_usage_pct: Fraction | None
    figures: agent_tokens.TokenFigures | None
    reservation: dict[str, Any] | None
    diagnostic: str | None
    recording_error: str | None = None

    def as_json(self, convoy: str, agent: str, projected: int) -> dict[str, Any]:
        """What ``tokens check`` prints."""
        return {
            "check_ref": self.check_ref,
            "allowed": self.allowed,
            "reason": self.reason.value,
            "remaining_tokens": self.remaining_tokens,
            "usage_pct": _pct_out(self.usage_pct),
            "agent_usage_pct": _pct_out(self.agent_usage_pct),
            "convoy": convoy,
            "agent": agent,
            "projected_tokens": projected,
            **_figure_fields(self.figures),
            "reservation_expires_at": self.reservation["expires_at"] if self.reservation else None,
            "diagnostic": self.diagnostic,
        }


def _figure_fields(fig: agent_tokens.TokenFigures | None) -> dict[str, int | None]:
    """The convoy's and the agent's caps, spend and reservations (``None`` without figures)."""
    return {
        "convoy_max_tokens": fig.convoy_max if fig else None,
        "agent_max_tokens": fig.agent_max if fig else None,
        "convoy_used_tokens": fig.convoy_used if fig else None,
        "convoy_reserved_tokens": fig.convoy_reserved if fig else None,
        "agent_used_tokens": fig.agent_used if fig else None,
        "agent_reserved_tokens": fig.agent_reserved if fig else None,
    }


def _pct_out(value: Fraction | None) -> float | None:
    return None if value is None else round(float(value), 4)


def tokens_check(deps: AgentDeps, convoy: str, agent: str, projected: int) -> TokenCheck:
    """Check ``projected`` tokens for ``agent`` and reserve them when admitted.

    Never raises for a damaged chain, a busy lock, an unusable key or a clock
    or deadline outside what the chain can hold: the answer is then a refusal
    (``counter_inconsistent``) that says why.
    """
    try:
        with agent_session(deps) as session:
            return _tokens_check_locked(session, deps, convoy, agent, projected)
    except (LockTimeoutError, ChainIOError, InputDataError, ClockRangeError, OverflowError) as exc:
        return TokenCheck(
            False, TokenReason.COUNTER_INCONSISTENT, None, None, None, None, None, None,
            f"check not recorded: {exc}", str(exc),
        )  # fmt: skip


def _tokens_check_locked(
    session: AgentSession, deps: AgentDeps, convoy: str, agent: str, projected: int
) -> TokenCheck:
    state = session.agents["convoys"].get(convoy)
    fig = None
    reservation = None
    if session.problem is not None:
        result = TokenCheck(
            False, TokenReason.COUNTER_INCONSISTENT, None, None, None, None, None, None,
            session.problem,
        )  # fmt: skip
    elif state is None:
        result = TokenCheck(
            False, TokenReason.UNKNOWN_CONVOY, None, None, None, None, None, None,
            f"no token budget for convoy {convoy}; refused (fail-closed). "
            f"Create one with `ledger tokens create {convoy}`",
        )  # fmt: skip
    else:
        fig = agent_tokens.figures(state, agent, session.now_ts)
        decision = agent_tokens.decide_tokens(fig, projected)
        if decision.allowed and projected > 0:
            expires = session.now + dt.timedelta(seconds=deps.config.reservation_ttl_seconds)
            reservation = {"tokens": projected, "expires_at": format_ts(expires)}
        result = TokenCheck(
            decision.allowed, decision.reason, None, decision.remaining_tokens,
            decision.convoy_pct, decision.agent_pct, fig, reservation, None,
        )  # fmt: skip
    payload = {
        "convoy": convoy,
        "agent": agent,
        "projected_tokens": projected,
        "allowed": result.allowed,
        "reason": result.reason.value,
        "remaining_tokens": result.remaining_tokens,
        "usage_pct": _pct_payload(result.usage_pct),
        "agent_usage_pct": _pct_payload(result.agent_usage_pct),
        **_figure_fields(fig),
        "diagnostic": clip(result.diagnostic),
        "local_time": session.now_ts,
        "reservation": reservation,
    }
    sealed = session.append("tokens.check", payload)
    return TokenCheck(
        result.allowed, result.reason, sealed.entry_hash, result.remaining_tokens,
        result.usage_pct, result.agent_usage_pct, fig, reservation, result.diagnostic,
    )  # fmt: skip


def _pct_payload(value: Fraction | None) -> str | None:
    return None if value is None else agent_tokens.pct_text(value)


def tokens_record(
    deps: AgentDeps, convoy: str, agent: str, tokens_in: int, tokens_out: int,
    check_ref: str | None, idempotency_key: str | None = None,
) -> tuple[dict[str, Any], str | None]:  # fmt: skip
    """Record actual use and settle its reservation. Use is never refused.

    With ``check_ref``, that reservation is settled; without, the agent's oldest
    open reservation in the convoy (one check, one record). An unknown,
    expired or foreign ``check_ref``, or an unknown convoy, is recorded anyway
    with a warning (the second element).
    """
    with agent_session(deps) as session:
        if idempotency_key is not None:
            first = find_duplicate(session.counter, deps, idempotency_key, "tokens.record")
            if first is not None:
                return _token_record_result(first["entry_hash"], first["payload"], None, True), None
        state = session.agents["convoys"].get(convoy)
        warning = None
        settled = None
        if state is None:
            warning = f"no token budget for convoy {convoy}; use recorded anyway"
        else:
            live = {
                ref: res
                for ref, res in state["reservations"].items()
                if res["expires_at"] > session.now_ts and res["agent"] == agent
            }
            if check_ref is not None:
                if check_ref in live:
                    settled = check_ref
                else:
                    warning = (
                        f"check_ref {short_ref(check_ref)}… is unknown, expired, already settled "
                        f"or not {agent}'s in {convoy}; recorded anyway"
                    )
            elif live:
                settled = min(live, key=lambda ref: (live[ref]["ts"], ref))
        payload = {
            "convoy": convoy,
            "agent": agent,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "check_ref": check_ref,
            "settled_ref": settled,
            "known_convoy": state is not None,
            "idempotency_key": idempotency_key,
        }
        sealed = session.append("tokens.record", payload)
        remember_keys_untrusted(session.counter, deps.states)
        after = session.agents["convoys"].get(convoy)
        used = agent_tokens.agent_used(after, agent) if after is not None else None
    return _token_record_result(sealed.entry_hash, payload, used, False), warning


def _token_record_result(
    entry_hash: str, payload: dict[str, Any], used: int | None, duplicate: bool
) -> dict[str, Any]:
    tokens_in, tokens_out = int(payload["input_tokens"]), int(payload["output_tokens"])
    settled = payload.get("settled_ref")
    return {
        "recorded": True,
        "entry_hash": entry_hash,
        "convoy": payload["convoy"],
        "agent": payload["agent"],
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
        "check_ref": payload.get("check_ref"),
        "settled": settled is not None,
        "settled_ref": settled,
        "agent_used_tokens": used,
        "idempotency_key": payload.get("idempotency_key"),
        "duplicate": duplicate,
    }
