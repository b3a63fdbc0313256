"""Per-agent tool-call budgets (seed 001).

Budgets by role: explorer 4, observer 10, planner unlimited, builder from the
planner's formula ``min(9, 5 + max(0, files - 1) + (2 if prior_failures or
framework_confidence >= 0.6 else 0))``. Every invocation counts; exempt actions
(preflight checks, workspace complete/block, memory operations, phase
transitions) do not. A budget is exhausted when ``used >= budget``: the next
counted call is refused, an exempt one is still admitted.
"""

from enum import StrEnum
from fractions import Fraction
from typing import Any, NamedTuple

ROLES = ("explorer", "planner", "builder", "observer")
FIXED_BUDGETS: dict[str, int | None] = {"explorer": 4, "observer": 10, "planner": None}
BUILDER_MINIMUM = 5
BUILDER_MAXIMUM = 9
COMPLEXITY_BONUS = 2
CONFIDENCE_THRESHOLD = Fraction(6, 10)
EXHAUSTED_GUIDANCE = {
    "builder": "GOTO BLOCK (budget exhausted).",
    "observer": "Complete the current phase and note the incomplete analysis.",
    "explorer": 'Return partial results with status: "partial".',
    "planner": "",
}


def builder_budget(files: int, prior_failures: bool, framework_confidence: Fraction) -> int:
    """The planner's formula for a builder's budget (seed 001)."""
    file_bonus = max(0, files - 1)
    complex_task = prior_failures or framework_confidence >= CONFIDENCE_THRESHOLD
    complexity = COMPLEXITY_BONUS if complex_task else 0
    return min(BUILDER_MAXIMUM, BUILDER_MINIMUM + file_bonus + complexity)


def role_budget(
    role: str, files: int = 1, prior_failures: bool = False,
    framework_confidence: Fraction = Fraction(0),
) -> int | None:  # fmt: skip
    """A role's budget; ``None`` is unlimited (planner)."""
    if role == "builder":
        return builder_budget(files, prior_failures, framework_confidence)
    return FIXED_BUDGETS[role]


class ToolOutcome(StrEnum):
    """What became of one tool call."""

    COUNTED = "counted"
    EXEMPT = "exempt"
    REFUSED = "refused"


def total_text(total: int | None) -> str:
    """A budget for people: a number or ``unlimited``."""
    return "unlimited" if total is None else str(total)


def budget_line(used: int, total: int | None) -> str:
    """Seed 001's tracking line ``Budget: {used}/{total}``."""
    return f"Budget: {used}/{total_text(total)}"


def exhausted(state: dict[str, Any]) -> bool:
    """Whether a counted call would go over the budget."""
    total = state.get("total")
    return total is not None and int(state["used"]) >= int(total)


def decide_use(state: dict[str, Any], exempt: bool) -> ToolOutcome:
    """Whether one call is counted, exempt, or refused (budget exhausted)."""
    if exempt:
        return ToolOutcome.EXEMPT
    if exhausted(state):
        return ToolOutcome.REFUSED
    return ToolOutcome.COUNTED


def exhausted_reason(agent: str, state: dict[str, Any]) -> str:
    """Why a call is refused, with the role's exhaustion handling from seed 001."""
    role = str(state.get("role"))
    guidance = EXHAUSTED_GUIDANCE.get(role, "")
    line = budget_line(int(state["used"]), state.get("total"))
    text = f"Tool-call budget exhausted for agent {agent} ({role}): {line}."
    return f"{text} {guidance}".strip()


def no_budget_reason(agent: str) -> str:
    """Why a call is refused for an agent without a budget (fail-closed)."""
    return (
        f"no tool-call budget for agent {agent}; refused (fail-closed). "
        f"Create one with `ledger tools create {agent} --role ...`."
    )


class ToolView(NamedTuple):
    """An agent's tool-call figures as printed."""

    agent: str
    role: str
    total: int | None
    used: int
    exempt: int
    refused: int

    @classmethod
    def of(cls, agent: str, state: dict[str, Any]) -> "ToolView":
        """The view of one agent's folded state."""
        return cls(
            agent, str(state["role"]), state.get("total"), int(state["used"]),
            int(state.get("exempt", 0)), int(state.get("refused", 0)),
        )  # fmt: skip

    def as_json(self) -> dict[str, Any]:
        """Seed 001's terms: ``budget``, ``budget_used``, ``budget_remaining``."""
        remaining = None if self.total is None else max(0, self.total - self.used)
        return {
            "agent": self.agent,
            "role": self.role,
            "budget": self.total,
            "budget_used": self.used,
            "budget_remaining": remaining,
            "exempt_calls": self.exempt,
            "refused_calls": self.refused,
            "exhausted": self.total is not None and self.used >= self.total,
            "message": budget_line(self.used, self.total),
        }
