"""Workflow turn budgets (seed 000): advisory warnings at 80 % and 100 %.

A workflow has a limit for all its turns (``total``) and one for the current
phase (``phase``); a phase transition starts a new phase count. The higher of
the two percentages decides: ``≥ 80 %`` warns, ``≥ 100 %`` is exceeded. Turn
budgets never block; the verdict is advice for the agent.

Percentages are compared exactly and shown as whole numbers rounded down, so a
shown ``80%`` always means the threshold is reached (79.9 % shows ``79%``).
"""

from enum import StrEnum
from typing import Any, NamedTuple

WARN_PCT = 80
EXCEEDED_PCT = 100
TURN_TYPES = ("tool_use", "file_change", "delegation")
INITIAL_PHASE = "initial"

WARNING_TEMPLATE = (
    "BUDGET WARNING: Approaching limit.\n"
    "  Total: {effective_total}/{total} turns ({total_pct}%)\n"
    "  Phase: {effective_phase}/{phase} turns ({phase_pct}%)\n"
    "  Remaining: ~{remaining} turns before limit.\n"
    "Prioritize completing current task. Consider saving progress."
)
EXCEEDED_TEMPLATE = (
    "BUDGET EXCEEDED: Turn limit reached.\n"
    "  Total: {effective_total}/{total} turns ({total_pct}%)\n"
    "  Phase: {effective_phase}/{phase} turns ({phase_pct}%)\n"
    "ACTION REQUIRED: Save current state to WORKFLOW_STATE.yaml and PROGRESS.md, then stop.\n"
    "Use /team-shinchan:budget --reset to start a new budget cycle if needed."
)


class TurnVerdict(StrEnum):
    """The advice of a turn check."""

    OK = "ok"
    WARNING = "warning"
    EXCEEDED = "exceeded"
    NO_BUDGET = "no_budget"


class TurnStatus(NamedTuple):
    """A workflow's turn figures and the advice they give."""

    workflow: str
    verdict: TurnVerdict
    effective_total: int
    total: int
    total_pct: int
    effective_phase: int
    phase: int
    phase_pct: int
    phase_name: str
    remaining: int
    message: str

    def as_json(self) -> dict[str, Any]:
        """The status as printed by ``turns check`` (without the check's ref)."""
        return {
            "workflow": self.workflow,
            "budget_applies": True,
            "allowed": True,
            "advisory": True,
            "verdict": self.verdict.value,
            "effective_total": self.effective_total,
            "total": self.total,
            "total_pct": self.total_pct,
            "effective_phase": self.effective_phase,
            "phase": self.phase,
            "phase_pct": self.phase_pct,
            "phase_name": self.phase_name,
            "remaining": self.remaining,
            "message": self.message,
        }


def _floor_pct(used: int, limit: int) -> int:
    return (100 * used) // limit


def assess(workflow: str, state: dict[str, Any]) -> TurnStatus:
    """Seed 000's thresholds for one workflow's folded state."""
    total, phase = int(state["total"]), int(state["phase"])
    used_total, used_phase = int(state["used_total"]), int(state["used_phase"])
    total_pct, phase_pct = _floor_pct(used_total, total), _floor_pct(used_phase, phase)
    remaining = min(total - used_total, phase - used_phase)
    values = {
        "effective_total": used_total,
        "total": total,
        "total_pct": total_pct,
        "effective_phase": used_phase,
        "phase": phase,
        "phase_pct": phase_pct,
        "remaining": remaining,
    }
    # Integer percentages rounded down compare like the exact ones against 80 and 100.
    highest = max(total_pct, phase_pct)
    if highest >= EXCEEDED_PCT:
        verdict, message = TurnVerdict.EXCEEDED, EXCEEDED_TEMPLATE.format(**values)
    elif highest >= WARN_PCT:
        verdict, message = TurnVerdict.WARNING, WARNING_TEMPLATE.format(**values)
    else:
        verdict = TurnVerdict.OK
        message = (
            f"Turns: {used_total}/{total} total ({total_pct}%), "
            f"{used_phase}/{phase} phase ({phase_pct}%)"
        )
    return TurnStatus(
        workflow, verdict, used_total, total, total_pct, used_phase, phase, phase_pct,
        str(state.get("phase_name", INITIAL_PHASE)), remaining, message,
    )  # fmt: skip


def no_budget(workflow: str) -> dict[str, Any]:
    """The fail-open answer of seed 000 when no budget is configured."""
    return {
        "workflow": workflow,
        "budget_applies": False,
        "allowed": True,
        "advisory": True,
        "verdict": TurnVerdict.NO_BUDGET.value,
        "message": (
            f"no turn budget applies: workflow {workflow!r} has none "
            "(create one with `ledger turns create`); ALLOW"
        ),
    }


def status_line(status: TurnStatus) -> str:
    """One line for a hook's context."""
    return (
        f"Turns: {status.effective_total}/{status.total} total ({status.total_pct}%), "
        f"{status.effective_phase}/{status.phase} phase ({status.phase_pct}%)"
    )
