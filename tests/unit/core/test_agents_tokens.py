"""Seed 003's checkBudget with reservations: boundaries and reasons."""

from fractions import Fraction

import pytest

from ledger.core.agents.tokens import (
    TokenFigures,
    TokenReason,
    convoy_report,
    decide_tokens,
    figures,
    pct_text,
)


def fig(
    convoy_max=1000,
    agent_max=500,
    warn=80,
    convoy_used=0,
    convoy_reserved=0,
    agent_used=0,
    agent_reserved=0,
):
    return TokenFigures(
        convoy_max,
        agent_max,
        Fraction(warn),
        convoy_used,
        convoy_reserved,
        agent_used,
        agent_reserved,
    )


def test_reaching_the_agent_limit_exactly_is_allowed():
    decision = decide_tokens(fig(agent_used=400), 100)
    assert decision.allowed
    assert decision.reason is TokenReason.WARNING
    assert decision.remaining_tokens == 0


def test_one_token_over_the_agent_limit_is_refused():
    decision = decide_tokens(fig(agent_used=400), 101)
    assert not decision.allowed
    assert decision.reason is TokenReason.AGENT_EXCEEDED
    assert decision.remaining_tokens == 100


def test_reaching_the_convoy_limit_exactly_is_allowed():
    decision = decide_tokens(fig(convoy_max=1000, agent_max=2000, convoy_used=600), 400)
    assert decision.allowed
    assert decision.remaining_tokens == 0
    assert decision.convoy_pct == 100


def test_one_token_over_the_convoy_limit_is_refused():
    decision = decide_tokens(fig(convoy_max=1000, agent_max=2000, convoy_used=600), 401)
    assert not decision.allowed
    assert decision.reason is TokenReason.CONVOY_EXCEEDED
    assert decision.remaining_tokens == 400
    assert decision.convoy_pct == 60  # nothing reserved by a refusal


def test_agent_limit_is_checked_before_the_convoy_limit():
    decision = decide_tokens(fig(convoy_max=100, agent_max=100, convoy_used=90, agent_used=90), 50)
    assert decision.reason is TokenReason.AGENT_EXCEEDED


def test_reservations_count_as_used():
    assert not decide_tokens(fig(agent_reserved=450), 51).allowed
    assert decide_tokens(fig(agent_reserved=450), 50).allowed
    assert not decide_tokens(fig(convoy_max=1000, agent_max=5000, convoy_reserved=990), 11).allowed


@pytest.mark.parametrize(
    ("projected", "reason"),
    [
        (790, TokenReason.OK),
        (799, TokenReason.OK),
        (800, TokenReason.WARNING),
        (990, TokenReason.WARNING),
        (1000, TokenReason.WARNING),
    ],
)
def test_convoy_warning_threshold_79_80_99_100(projected, reason):
    decision = decide_tokens(fig(convoy_max=1000, agent_max=10_000), projected)
    assert decision.allowed
    assert decision.reason is reason


@pytest.mark.parametrize(
    ("projected", "reason"), [(399, TokenReason.OK), (400, TokenReason.WARNING)]
)
def test_agent_warning_threshold(projected, reason):
    # 400 of the agent's 500 is 80 %, while the convoy is at 4 %.
    decision = decide_tokens(fig(convoy_max=10_000, agent_max=500), projected)
    assert decision.reason is reason


def test_remaining_is_the_tighter_limit_after_the_projection():
    decision = decide_tokens(fig(convoy_max=1000, agent_max=500, convoy_used=700), 100)
    assert decision.remaining_tokens == 200  # convoy: 1000 - 700 - 100
    decision = decide_tokens(fig(convoy_max=10_000, agent_max=500, agent_used=100), 100)
    assert decision.remaining_tokens == 300  # agent: 500 - 100 - 100


def test_zero_limits():
    assert not decide_tokens(fig(convoy_max=0), 1).allowed
    zero = decide_tokens(fig(convoy_max=0, agent_max=0), 0)
    assert zero.allowed
    assert zero.convoy_pct == 100  # a zero limit counts as fully used, as the seed


def test_custom_warn_pct():
    assert (
        decide_tokens(fig(convoy_max=1000, agent_max=5000, warn=50), 499).reason is TokenReason.OK
    )
    assert (
        decide_tokens(fig(convoy_max=1000, agent_max=5000, warn=50), 500).reason
        is TokenReason.WARNING
    )


def test_pct_text_has_four_decimals():
    assert pct_text(Fraction(200, 3)) == "66.6667"
    assert pct_text(Fraction(100)) == "100.0000"


def _convoy():
    return {
        "convoy_max": 1000,
        "agent_max": 500,
        "warn_pct": "80",
        "created_at": "t",
        "input": 300,
        "output": 100,
        "agents": {"a": {"input": 300, "output": 100, "calls": 2}},
        "reservations": {
            "r1": {
                "agent": "a",
                "tokens": 50,
                "expires_at": "2026-01-01T00:10:00.000000Z",
                "ts": "x",
            },
            "r2": {
                "agent": "b",
                "tokens": 70,
                "expires_at": "2026-01-01T00:01:00.000000Z",
                "ts": "x",
            },
        },
    }


def test_figures_ignore_expired_reservations():
    early = figures(_convoy(), "a", "2026-01-01T00:00:00.000000Z")
    assert (early.convoy_used, early.convoy_reserved, early.agent_used, early.agent_reserved) == (
        400,
        120,
        400,
        50,
    )
    late = figures(_convoy(), "b", "2026-01-01T00:05:00.000000Z")
    assert (late.convoy_reserved, late.agent_used, late.agent_reserved) == (50, 0, 0)


def test_report_follows_the_seed():
    report = convoy_report("c", _convoy(), "2026-01-01T00:05:00.000000Z")
    assert report["total_consumed"] == 400
    assert report["max_allowed"] == 1000
    assert report["percent_used"] == 40
    assert report["warning_active"] is False
    assert report["budget_exhausted"] is False
    assert report["reserved_tokens"] == 50
    assert report["agents"] == [
        {
            "agent": "a",
            "consumed": 400,
            "input_tokens": 300,
            "output_tokens": 100,
            "calls": 2,
            "reserved": 50,
            "max_allowed": 500,
            "percent_used": 80,
        },
    ]
