"""Seed 000: the higher of total % and phase % decides; 80 % warns, 100 % is exceeded."""

import pytest

from ledger.core.agents.turns import TurnVerdict, assess, no_budget


def state(used_total, total, used_phase, phase, name="initial"):
    return {
        "total": total,
        "phase": phase,
        "used_total": used_total,
        "used_phase": used_phase,
        "phase_name": name,
    }


@pytest.mark.parametrize(
    ("used", "verdict"),
    [
        (79, TurnVerdict.OK),
        (80, TurnVerdict.WARNING),
        (99, TurnVerdict.WARNING),
        (100, TurnVerdict.EXCEEDED),
        (101, TurnVerdict.EXCEEDED),
    ],
)
def test_total_thresholds(used, verdict):
    assert assess("w", state(used, 100, 0, 1000)).verdict is verdict


@pytest.mark.parametrize(
    ("used", "verdict"),
    [
        (39, TurnVerdict.OK),
        (40, TurnVerdict.WARNING),
        (49, TurnVerdict.WARNING),
        (50, TurnVerdict.EXCEEDED),
    ],
)
def test_phase_thresholds_decide_when_higher(used, verdict):
    # Phase limit 50: 39 is 78 %, 40 is 80 %, 49 is 98 %, 50 is 100 %; total stays low.
    assert assess("w", state(used, 1000, used, 50)).verdict is verdict


def test_fractional_percentages_round_down_and_compare_exactly():
    # 159/200 = 79.5 %: not yet a warning, shown as 79 %.
    status = assess("w", state(159, 200, 0, 50))
    assert status.verdict is TurnVerdict.OK
    assert status.total_pct == 79
    assert assess("w", state(160, 200, 0, 50)).verdict is TurnVerdict.WARNING


def test_warning_message_is_the_seeds():
    status = assess("w", state(160, 200, 41, 50))
    assert status.verdict is TurnVerdict.WARNING
    assert status.message == (
        "BUDGET WARNING: Approaching limit.\n"
        "  Total: 160/200 turns (80%)\n"
        "  Phase: 41/50 turns (82%)\n"
        "  Remaining: ~9 turns before limit.\n"
        "Prioritize completing current task. Consider saving progress."
    )


def test_exceeded_message_is_the_seeds():
    status = assess("w", state(120, 200, 50, 50))
    assert status.verdict is TurnVerdict.EXCEEDED
    assert status.message == (
        "BUDGET EXCEEDED: Turn limit reached.\n"
        "  Total: 120/200 turns (60%)\n"
        "  Phase: 50/50 turns (100%)\n"
        "ACTION REQUIRED: Save current state to WORKFLOW_STATE.yaml and PROGRESS.md, then stop.\n"
        "Use /team-shinchan:budget --reset to start a new budget cycle if needed."
    )


def test_remaining_is_the_smaller_of_the_two():
    assert assess("w", state(10, 100, 45, 50)).remaining == 5
    assert assess("w", state(95, 100, 5, 50)).remaining == 5


def test_no_budget_is_fail_open_and_says_so():
    view = no_budget("w")
    assert view["allowed"] is True
    assert view["budget_applies"] is False
    assert view["verdict"] == "no_budget"
    assert "no turn budget applies" in view["message"]
