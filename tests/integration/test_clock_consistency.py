"""Deadlines are set and judged on one clock: the chain's (SPEC §2, §4).

An entry is sealed at the later of the local clock and the chain's newest
``ts_utc``, and folds judge expiry by each entry's own ``ts_utc``. So every
deadline a step writes is taken from the time it seals with: a writer whose
clock runs behind the head still keeps its reservation for the full TTL.
"""

import json

from tests.integration.test_agent_helpers import cli, payloads

HEAD = "2026-06-01T12:00:00Z"
BEHIND = "2026-06-01T11:50:00Z"  # ten minutes behind the head


def _now(text: str) -> dict[str, str]:
    return {"LEDGER_NOW": text}


def test_token_reservation_of_a_writer_behind_the_head_lives_its_full_ttl(home, run_inproc):
    assert cli(run_inproc, home, "tokens", "create", "c", "--agent-max", "1000",
               env=_now(HEAD)).code == 0  # fmt: skip
    check = cli(run_inproc, home, "tokens", "check", "c", "a", "600", env=_now(BEHIND))
    assert check.code == 0, check.stdout
    body = check.json()
    assert body["reservation_expires_at"] == "2026-06-01T12:15:00.000000Z"
    # Still held just before the TTL runs out on the chain's clock: 600 + 401 > 1000.
    over = cli(run_inproc, home, "tokens", "check", "c", "a", "401",
               env=_now("2026-06-01T12:14:59Z"))  # fmt: skip
    assert over.code == 1
    assert over.json()["reason"] == "agent_budget_exceeded"
    # And released once the TTL has passed.
    later = cli(run_inproc, home, "tokens", "check", "c", "a", "401",
                env=_now("2026-06-01T12:15:01Z"))  # fmt: skip
    assert later.code == 0, later.stdout


def test_token_record_behind_the_head_settles_the_live_reservation(home, run_inproc):
    cli(run_inproc, home, "tokens", "create", "c", "--agent-max", "1000", env=_now(HEAD))
    ref = cli(run_inproc, home, "tokens", "check", "c", "a", "600", env=_now(HEAD)).json()
    record = cli(run_inproc, home, "tokens", "record", "c", "a", "100", "100",
                 "--check-ref", ref["check_ref"], env=_now(BEHIND))  # fmt: skip
    assert record.code == 0
    assert record.json()["settled"] is True
    assert record.stderr == ""


def test_usd_reservation_of_a_verdict_behind_the_head_lives_its_full_ttl(home, run_inproc):
    first = cli(run_inproc, home, "verdict", "1", env=_now(HEAD))
    assert first.code == 0
    # 30 s behind: inside clock_tolerance_seconds (60), so the verdict decides.
    behind = cli(run_inproc, home, "verdict", "2", env=_now("2026-06-01T11:59:30Z"))
    assert behind.code == 0, behind.stdout
    sealed = payloads(home, "budget.allow")[-1]
    assert sealed["reservation"]["expires_at"] == "2026-06-01T12:15:00.000000Z"
    assert sealed["local_time"] == "2026-06-01T11:59:30.000000Z"
    usage = cli(run_inproc, home, "usage", env=_now("2026-06-01T12:14:59Z")).json()
    assert usage["usd_reserved_micros"] == 3_000_000


def test_countdown_started_behind_the_head_counts_from_the_chain_time(home, run_inproc):
    cli(run_inproc, home, "verdict", "1", env=_now(HEAD))
    start = cli(run_inproc, home, "time", "start", "--budget-seconds", "600", env=_now(BEHIND))
    assert start.code == 0, start.stderr
    assert json.loads(start.stdout)["deadline"].startswith("2026-06-01T12:10:00")


def test_record_after_midnight_counts_on_its_reservations_day(tmp_path, run_inproc):
    home = tmp_path / "h"
    assert run_inproc(["--home", str(home), "init", "--daily-cap-usd", "10"]).code == 0
    late = cli(run_inproc, home, "verdict", "7", env=_now("2026-06-01T23:59:59.900000Z"))
    early = cli(run_inproc, home, "verdict", "7", env=_now("2026-06-02T00:00:01Z"))
    assert (late.code, early.code) == (0, 0), (late.stdout, early.stdout)
    for verdict in (late, early):
        ref = verdict.json()["verdict_ref"]
        recorded = cli(run_inproc, home, "record", "7", "--provider", "openai",
                       "--verdict-ref", ref, env=_now("2026-06-02T00:00:02Z"))  # fmt: skip
        assert recorded.code == 0
        assert recorded.json()["settled"] is True
    days = [p["utc_day"] for p in payloads(home, "budget.record_call")]
    assert days == ["2026-06-01", "2026-06-02"]
    today = cli(run_inproc, home, "usage", env=_now("2026-06-02T00:00:03Z")).json()
    assert today["usd_used_micros"] == 7_000_000
    again = cli(run_inproc, home, "verdict", "7", env=_now("2026-06-02T00:00:04Z"))
    assert again.json()["verdict"] == "halt-100"
