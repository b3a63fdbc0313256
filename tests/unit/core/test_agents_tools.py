"""Seed 001: role budgets, the planner's formula for builders, exhaustion."""

from fractions import Fraction

import pytest

from ledger.core.agents.tools import (
    ToolOutcome,
    budget_line,
    builder_budget,
    decide_use,
    exhausted_reason,
    role_budget,
)


@pytest.mark.parametrize(
    ("files", "prior_failures", "confidence", "budget"),
    [
        (1, False, "0", 5),  # single file, no complexity: minimum viable
        (1, False, "0.6", 7),  # single file + framework: +2 complexity
        (2, False, "0", 6),  # 2 files: +1 file bonus
        (3, True, "0", 9),  # 3 files + prior failures: 5 + 2 files + 2 complexity
    ],
)
def test_the_seeds_table(files, prior_failures, confidence, budget):
    assert builder_budget(files, prior_failures, Fraction(confidence)) == budget


def test_formula_edges():
    assert builder_budget(0, False, Fraction(0)) == 5  # no file bonus below one file
    assert builder_budget(1, False, Fraction("0.59")) == 5  # below the confidence threshold
    assert builder_budget(1, False, Fraction("0.6")) == 7  # at it
    assert builder_budget(1, True, Fraction("0.9")) == 7  # complexity counts once
    assert builder_budget(5, False, Fraction(0)) == 9
    assert builder_budget(10, True, Fraction(1)) == 9  # capped at 9


def test_fixed_roles():
    assert role_budget("explorer") == 4
    assert role_budget("observer") == 10
    assert role_budget("planner") is None
    assert role_budget("builder", 2, False, Fraction(0)) == 6


def test_exhaustion():
    state = {"role": "builder", "total": 5, "used": 4}
    assert decide_use(state, exempt=False) is ToolOutcome.COUNTED
    state["used"] = 5
    assert decide_use(state, exempt=False) is ToolOutcome.REFUSED
    assert decide_use(state, exempt=True) is ToolOutcome.EXEMPT
    assert decide_use({"role": "planner", "total": None, "used": 1000}, exempt=False) is (
        ToolOutcome.COUNTED
    )
    assert exhausted_reason("b1", state) == (
        "Tool-call budget exhausted for agent b1 (builder): Budget: 5/5. "
        "GOTO BLOCK (budget exhausted)."
    )


def test_budget_line_is_the_seeds_tracking_line():
    assert budget_line(3, 9) == "Budget: 3/9"
    assert budget_line(3, None) == "Budget: 3/unlimited"
