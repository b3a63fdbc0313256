"""Seed 002: the four urgency tiers, their boundaries and the Xm / XmYs format."""

import datetime as dt

import pytest

from ledger.core.agents.time import (
    Countdown,
    Tier,
    countdown_message,
    format_remaining,
    parse_budget_end,
    remaining_seconds,
    tier,
)


@pytest.mark.parametrize(
    ("remaining", "expected"),
    [
        (1200, Tier.CONTINUE),
        (301, Tier.CONTINUE),
        (300, Tier.WRAP_UP),
        (192, Tier.WRAP_UP),
        (120, Tier.WRAP_UP),
        (119, Tier.COMMIT_NOW),
        (1, Tier.COMMIT_NOW),
        (0, Tier.EXPIRED),
        (-5, Tier.EXPIRED),
    ],
)
def test_tier_boundaries(remaining, expected):
    assert tier(remaining) is expected


@pytest.mark.parametrize(
    ("remaining", "text"),
    [
        (1200, "20m"),
        (192, "3m12s"),
        (301, "5m1s"),
        (300, "5m"),
        (120, "2m"),
        (119, "1m59s"),
        (60, "1m"),
        (45, "45s"),
        (1, "1s"),
        (0, "0s"),
        (-3, "0s"),
        (5400, "90m"),
    ],
)
def test_format(remaining, text):
    assert format_remaining(remaining) == text


def test_messages_are_the_seeds():
    assert countdown_message(1200) == "BUDGET: 20m remaining"
    assert countdown_message(301) == "BUDGET: 5m1s remaining"
    assert countdown_message(300) == "▲ BUDGET: 5m — wrap up and commit soon"
    assert countdown_message(192) == "▲ BUDGET: 3m12s — wrap up and commit soon"
    assert countdown_message(120) == "▲ BUDGET: 2m — wrap up and commit soon"
    assert countdown_message(119) == "▲▲▲ BUDGET: 1m59s — STOP EDITING, COMMIT NOW, EXIT ▲▲▲"
    assert countdown_message(1) == "▲▲▲ BUDGET: 1s — STOP EDITING, COMMIT NOW, EXIT ▲▲▲"
    assert countdown_message(0) == "▲▲▲ BUDGET EXPIRED — COMMIT NOW AND EXIT ▲▲▲"


def test_remaining_rounds_down():
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert remaining_seconds(now + dt.timedelta(seconds=120, microseconds=999_999), now) == 120
    assert remaining_seconds(now + dt.timedelta(microseconds=999_999), now) == 0
    assert remaining_seconds(now - dt.timedelta(microseconds=1), now) == -1
    countdown = Countdown(now + dt.timedelta(seconds=300, microseconds=500_000), "env", now)
    assert countdown.tier is Tier.WRAP_UP


def test_parse_budget_end():
    assert parse_budget_end("1767225600") == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert parse_budget_end(" 1767225600.5 ") == dt.datetime(
        2026, 1, 1, 0, 0, 0, 500_000, tzinfo=dt.UTC
    )
    for bad in ("", "abc", "-5", "1e9", "12:00", "999999999999"):
        with pytest.raises(ValueError, match="LEDGER_BUDGET_END"):
            parse_budget_end(bad)


def test_budget_end_refuses_a_trailing_newline_and_unicode_digits():
    for bad in ("1767225600\n5", "١٧٦٧٢٢٥٦٠٠"):
        with pytest.raises(ValueError, match="LEDGER_BUDGET_END"):
            parse_budget_end(bad)
