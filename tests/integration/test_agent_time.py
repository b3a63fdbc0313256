"""``ledger time``: seed 002's countdown from ``time start`` or ``LEDGER_BUDGET_END``."""

import datetime as dt

import pytest

from tests.integration.test_agent_helpers import assert_chain_verifies, cli

START = dt.datetime(2026, 11, 22, 8, 0, tzinfo=dt.UTC)


def now_env(seconds: int) -> dict[str, str]:
    moment = START + dt.timedelta(seconds=seconds)
    return {"LEDGER_NOW": moment.strftime("%Y-%m-%dT%H:%M:%SZ")}


@pytest.mark.parametrize(
    ("elapsed", "tier", "message"),
    [
        (0, "continue", "BUDGET: 20m remaining"),
        (899, "continue", "BUDGET: 5m1s remaining"),
        (900, "wrap_up", "▲ BUDGET: 5m — wrap up and commit soon"),
        (1008, "wrap_up", "▲ BUDGET: 3m12s — wrap up and commit soon"),
        (1080, "wrap_up", "▲ BUDGET: 2m — wrap up and commit soon"),
        (1081, "commit_now", "▲▲▲ BUDGET: 1m59s — STOP EDITING, COMMIT NOW, EXIT ▲▲▲"),
        (1199, "commit_now", "▲▲▲ BUDGET: 1s — STOP EDITING, COMMIT NOW, EXIT ▲▲▲"),
        (1200, "expired", "▲▲▲ BUDGET EXPIRED — COMMIT NOW AND EXIT ▲▲▲"),
        (5000, "expired", "▲▲▲ BUDGET EXPIRED — COMMIT NOW AND EXIT ▲▲▲"),
    ],
)
def test_start_then_status_through_the_tiers(home, run_inproc, elapsed, tier, message):
    started = cli(run_inproc, home, "time", "start", "--budget-seconds", "1200", env=now_env(0))
    assert started.code == 0
    assert started.json()["deadline"] == "2026-11-22T08:20:00.000000Z"
    status = cli(run_inproc, home, "time", "status", env=now_env(elapsed))
    assert status.code == 0
    assert (status.json()["tier"], status.json()["message"]) == (tier, message)
    assert status.json()["source"] == "start"


def test_end_option_and_env_wins(home, run_inproc):
    cli(run_inproc, home, "time", "start", "--end", "2026-11-22T09:00:00+01:00", env=now_env(0))
    status = cli(run_inproc, home, "time", "status", env=now_env(0)).json()
    assert (status["deadline"], status["remaining"], status["tier"]) == (
        "2026-11-22T08:00:00.000000Z",
        "0s",
        "expired",
    )
    end = int((START + dt.timedelta(seconds=250)).timestamp())
    env = now_env(0) | {"LEDGER_BUDGET_END": str(end)}
    by_env = cli(run_inproc, home, "time", "status", env=env).json()
    assert (by_env["source"], by_env["remaining_seconds"], by_env["tier"]) == (
        "env",
        250,
        "wrap_up",
    )
    assert by_env["message"] == "▲ BUDGET: 4m10s — wrap up and commit soon"
    assert_chain_verifies(run_inproc, home)


def test_no_deadline_is_inactive(home, run_inproc):
    status = cli(run_inproc, home, "time", "status")
    assert (status.code, status.json()["active"]) == (0, False)


def test_bad_input(home, run_inproc):
    assert cli(run_inproc, home, "time", "start").code == 2
    assert (
        cli(
            run_inproc,
            home,
            "time",
            "start",
            "--budget-seconds",
            "5",
            "--end",
            "2026-01-01T00:00:00Z",
        ).code
        == 2
    )
    assert cli(run_inproc, home, "time", "start", "--budget-seconds", "-5").code == 2
    assert (
        cli(run_inproc, home, "time", "start", "--end", "2026-01-01T00:00:00").code == 2
    )  # no zone
    bad_env = cli(run_inproc, home, "time", "status", env={"LEDGER_BUDGET_END": "soon"})
    assert bad_env.code == 78
    assert "LEDGER_BUDGET_END" in bad_env.stderr
