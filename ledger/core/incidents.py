"""Incidents: conditions that halt every verdict and that no sealed entry announces.

A torn chain, a store that cannot be reached, a counter that cannot be
trusted: while any of them stands, verdicts refuse, and the refusals cannot be
sealed, so a follower of the chain never sees them. The daemon checks for them
itself every ``alerts.check_seconds`` and alerts once when an incident begins
and once more (``"event": "recovered"``) when it clears.

Pure: the checks that find a condition live in the services; here are the
condition, and the messages people read.
"""

from dataclasses import dataclass

from ledger.core.alerts import Alert

# What lifts each incident, in the words the operator acts on.
_ACTION = {
    "broken": "every verdict halts until `ledger recover` (or `ledger rebuild-state`, "
    "as `ledger verify-chain` says) restores a trusted chain",
    "unavailable": "every verdict halts until the store answers again",
    "uncertainty": "every verdict near a cap halts until the cause is lifted",
}
_CLEARED = {
    "broken": "the chain is trusted again",
    "unavailable": "the store answers again",
    "uncertainty": "verdicts no longer halt under uncertainty",
}
_WHAT = {
    "broken": "the chain cannot be trusted",
    "unavailable": "the store cannot be reached",
    "uncertainty": "verdicts halt under uncertainty",
}


@dataclass(frozen=True)
class Condition:
    """One incident kind seen standing now: its event, its scope, and why (one line)."""

    event: str
    scope: str
    detail: str

    @property
    def key(self) -> str:
        """One incident per event and scope, however often it is seen."""
        return f"{self.event}|{self.scope}"


def incident_alert(condition: Condition, at: str, period: str) -> Alert:
    """The alert sent once when an incident begins."""
    text = (
        f"ledger: {_WHAT.get(condition.event, condition.event)} ({condition.scope}): "
        f"{condition.detail}; {_ACTION.get(condition.event, 'see `ledger status`')}"
    )
    return Alert(condition.event, condition.scope, period, None, at, text)


def recovered_alert(event: str, scope: str, since: str, at: str, period: str) -> Alert:
    """The alert sent once when an incident clears."""
    text = (
        f"ledger: recovered: {_CLEARED.get(event, event + ' cleared')} ({scope}, "
        f"{event} since {since}); verdicts are decided again"
    )
    return Alert("recovered", scope, period, None, at, text)
