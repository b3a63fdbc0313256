"""Countdown budgets (seed 002): a deadline for the home, advisory."""

import datetime as dt
from typing import Any

from ledger.core.agents import time as agent_time
from ledger.core.agents.time import countdown_from
from ledger.core.timefmt import format_ts
from ledger.errors import UsageError
from ledger.services.agents.session import AgentDeps, agent_session


def time_start(
    deps: AgentDeps, budget_seconds: int | None, end: dt.datetime | None
) -> dict[str, Any]:
    """Start the home's countdown: ``budget_seconds`` from now, or until ``end``."""
    with agent_session(deps) as session:
        if end is None:
            assert budget_seconds is not None  # noqa: S101 - the CLI gives exactly one
            try:
                deadline = session.now + dt.timedelta(seconds=budget_seconds)
            except OverflowError:
                raise UsageError(
                    "--budget-seconds: the deadline is outside what the chain can hold"
                ) from None
            source = "budget_seconds"
        else:
            deadline = end
            source = "end"
        payload = {
            "deadline": format_ts(deadline),
            "budget_seconds": budget_seconds,
            "source": source,
        }
        sealed = session.append("time.started", payload)
        countdown = agent_time.Countdown(deadline, "start", session.now, budget_seconds)
    return {**countdown.as_json(), "entry_hash": sealed.entry_hash}


def time_status(
    deps: AgentDeps, budget_end: dt.datetime | None, now: dt.datetime
) -> dict[str, Any]:
    """The countdown in force (read-only; the chain is read only without the variable)."""
    if budget_end is not None:
        return agent_time.Countdown(budget_end, "env", now).as_json()
    with agent_session(deps, write=False) as session:
        countdown = countdown_from(session.agents, None, session.now)
        view = agent_time.no_countdown() if countdown is None else countdown.as_json()
        view["diagnostic"] = session.problem
    return view
