"""Convoy token budgets (seed 003): check-before-execute with reservations.

A convoy has a hard limit for all its agents together and one per agent. A check
of ``projected`` tokens is refused when it would take the agent's or the
convoy's total **over** its limit (reaching a limit exactly is allowed); an
admitted check reserves the projection until ``tokens record`` settles it or it
expires. Reserved tokens count as used while they are open.

Order of the checks, as in the seed: the agent's limit first, then the
convoy's; an admitted check whose projected usage of either limit reaches
``warn_pct`` is ``warning_threshold``.
"""

from enum import StrEnum
from fractions import Fraction
from typing import Any, NamedTuple

from ledger.core.agents.ids import display_number, pct_value

DEFAULT_CONVOY_MAX = 500_000
DEFAULT_AGENT_MAX = 100_000
DEFAULT_WARN_PCT = "80"


class TokenReason(StrEnum):
    """Why a check was or was not admitted.

    The first four are seed 003's structured stop reasons. ``unknown_convoy``
    and ``counter_inconsistent`` are answers when no budget decision can be
    made (no such convoy; the chain or derived state cannot be trusted, or the
    check could not be recorded): both refuse, fail-closed.
    """

    OK = "ok"
    WARNING = "warning_threshold"
    CONVOY_EXCEEDED = "convoy_budget_exceeded"
    AGENT_EXCEEDED = "agent_budget_exceeded"
    UNKNOWN_CONVOY = "unknown_convoy"
    COUNTER_INCONSISTENT = "counter_inconsistent"


class TokenFigures(NamedTuple):
    """One agent's and its convoy's figures at one moment (reservations still open)."""

    convoy_max: int
    agent_max: int
    warn_pct: Fraction
    convoy_used: int
    convoy_reserved: int
    agent_used: int
    agent_reserved: int

    @property
    def convoy_remaining(self) -> int:
        """Convoy limit minus used and reserved (negative when over)."""
        return self.convoy_max - self.convoy_used - self.convoy_reserved

    @property
    def agent_remaining(self) -> int:
        """Agent limit minus its used and reserved (negative when over)."""
        return self.agent_max - self.agent_used - self.agent_reserved


class TokenDecision(NamedTuple):
    """The answer to one check."""

    allowed: bool
    reason: TokenReason
    remaining_tokens: int
    convoy_pct: Fraction
    agent_pct: Fraction


def pct_of(amount: int, limit: int) -> Fraction:
    """``100 × amount / limit``; a zero limit counts as 100 % used (as the seed)."""
    if limit <= 0:
        return Fraction(100)
    return Fraction(100 * amount, limit)


def open_reservations(convoy: dict[str, Any], now_ts: str) -> list[dict[str, Any]]:
    """The convoy's reservations that have not expired at ``now_ts``."""
    reservations: dict[str, dict[str, Any]] = convoy.get("reservations", {})
    return [res for res in reservations.values() if res["expires_at"] > now_ts]


def agent_used(convoy: dict[str, Any], agent: str) -> int:
    """Tokens an agent has recorded in a convoy (input + output)."""
    record = convoy.get("agents", {}).get(agent)
    return 0 if record is None else int(record["input"]) + int(record["output"])


def figures(convoy: dict[str, Any], agent: str, now_ts: str) -> TokenFigures:
    """The figures a check of ``agent`` in ``convoy`` decides on at ``now_ts``."""
    live = open_reservations(convoy, now_ts)
    return TokenFigures(
        convoy_max=int(convoy["convoy_max"]),
        agent_max=int(convoy["agent_max"]),
        warn_pct=pct_value(convoy["warn_pct"]),
        convoy_used=int(convoy["input"]) + int(convoy["output"]),
        convoy_reserved=sum(int(res["tokens"]) for res in live),
        agent_used=agent_used(convoy, agent),
        agent_reserved=sum(int(res["tokens"]) for res in live if res["agent"] == agent),
    )


def decide_tokens(fig: TokenFigures, projected: int) -> TokenDecision:
    """Seed 003's ``checkBudget`` with reservations counted as used.

    ``remaining_tokens``: refused — what is left under the limit that refused
    (never negative); admitted — what is left under the tighter of the two
    limits after this projection. The percentages are the convoy's and the
    agent's usage after this check (the projection included only if admitted).
    """
    convoy_now = fig.convoy_used + fig.convoy_reserved
    agent_now = fig.agent_used + fig.agent_reserved
    if projected > fig.agent_remaining:
        return TokenDecision(
            False, TokenReason.AGENT_EXCEEDED, max(0, fig.agent_remaining),
            pct_of(convoy_now, fig.convoy_max), pct_of(agent_now, fig.agent_max),
        )  # fmt: skip
    if projected > fig.convoy_remaining:
        return TokenDecision(
            False, TokenReason.CONVOY_EXCEEDED, max(0, fig.convoy_remaining),
            pct_of(convoy_now, fig.convoy_max), pct_of(agent_now, fig.agent_max),
        )  # fmt: skip
    convoy_pct = pct_of(convoy_now + projected, fig.convoy_max)
    agent_pct = pct_of(agent_now + projected, fig.agent_max)
    warn = convoy_pct >= fig.warn_pct or agent_pct >= fig.warn_pct
    remaining = min(fig.agent_remaining, fig.convoy_remaining) - projected
    reason = TokenReason.WARNING if warn else TokenReason.OK
    return TokenDecision(True, reason, remaining, convoy_pct, agent_pct)


def pct_text(value: Fraction) -> str:
    """A percentage for a payload: text with 4 decimals (payloads hold no floats)."""
    return f"{float(value):.4f}"


def convoy_report(name: str, convoy: dict[str, Any], now_ts: str) -> dict[str, Any]:
    """Seed 003's ``getBudgetReport`` (snake_case) with reservations shown apart."""
    limit = int(convoy["convoy_max"])
    agent_max = int(convoy["agent_max"])
    consumed = int(convoy["input"]) + int(convoy["output"])
    live = open_reservations(convoy, now_ts)
    reserved = sum(int(res["tokens"]) for res in live)
    percent = pct_of(consumed, limit) if limit > 0 else Fraction(0)
    warn = pct_value(convoy["warn_pct"])
    agents = []
    for agent_id in sorted(convoy.get("agents", {})):
        used = agent_used(convoy, agent_id)
        record = convoy["agents"][agent_id]
        agents.append(
            {
                "agent": agent_id,
                "consumed": used,
                "input_tokens": int(record["input"]),
                "output_tokens": int(record["output"]),
                "calls": int(record.get("calls", 0)),
                "reserved": sum(int(r["tokens"]) for r in live if r["agent"] == agent_id),
                "max_allowed": agent_max,
                "percent_used": display_number(
                    pct_of(used, agent_max) if agent_max else Fraction(0)
                ),
            }
        )
    return {
        "convoy": name,
        "total_consumed": consumed,
        "input_tokens": int(convoy["input"]),
        "output_tokens": int(convoy["output"]),
        "reserved_tokens": reserved,
        "max_allowed": limit,
        "agent_max_tokens": agent_max,
        "warn_pct": display_number(warn),
        "percent_used": display_number(percent),
        "warning_active": percent >= warn,
        "budget_exhausted": consumed >= limit,
        "open_reservations": len(live),
        "created_at": convoy.get("created_at"),
        "agents": agents,
    }
