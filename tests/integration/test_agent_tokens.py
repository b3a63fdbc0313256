"""``ledger tokens``: convoy budgets, check-and-reserve, record-and-settle, expiry, concurrency."""

import json
import subprocess
import sys
import textwrap

from tests.integration.test_agent_helpers import (
    assert_chain_verifies,
    cli,
    event_types,
    payloads,
    popen_ledger,
    process_env,
)

T0 = "2026-11-22T08:00:00Z"


def at(seconds: int) -> dict[str, str]:
    minutes, rest = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return {"LEDGER_NOW": f"2026-11-22T{8 + hours:02d}:{minutes:02d}:{rest:02d}Z"}


def test_create_defaults_list_report_delete(home, run_inproc):
    created = cli(run_inproc, home, "tokens", "create", "sprint-1")
    assert created.code == 0, created.stderr
    assert created.json() | {"entry_hash": None} == {
        "created": True,
        "convoy": "sprint-1",
        "convoy_max_tokens": 500_000,
        "agent_max_tokens": 100_000,
        "warn_pct": 80,
        "entry_hash": None,
    }
    assert (
        cli(
            run_inproc,
            home,
            "tokens",
            "create",
            "sprint-2",
            "--convoy-max",
            "1000",
            "--agent-max",
            "300",
            "--warn-pct",
            "75.5",
        ).code
        == 0
    )
    listing = cli(run_inproc, home, "tokens", "list").json()["convoys"]
    assert [
        (c["convoy"], c["max_allowed"], c["agent_max_tokens"], c["warn_pct"]) for c in listing
    ] == [
        ("sprint-1", 500_000, 100_000, 80),
        ("sprint-2", 1000, 300, 75.5),
    ]
    report = cli(run_inproc, home, "tokens", "report", "sprint-2").json()
    assert (report["total_consumed"], report["percent_used"], report["agents"]) == (0, 0, [])
    again = cli(run_inproc, home, "tokens", "create", "sprint-2")
    assert again.code == 2
    assert "already has a token budget" in again.stderr
    deleted = cli(run_inproc, home, "tokens", "delete", "sprint-2")
    assert deleted.json()["deleted"] is True
    assert cli(run_inproc, home, "tokens", "delete", "sprint-2").json()["deleted"] is False
    missing = cli(run_inproc, home, "tokens", "report", "sprint-2")
    assert missing.code == 1
    assert missing.stderr.startswith("ledger: no token budget for convoy sprint-2")
    assert event_types(home) == [
        "tokens.budget_created",
        "tokens.budget_created",
        "tokens.budget_deleted",
    ]
    assert_chain_verifies(run_inproc, home)


def test_bad_command_lines_exit_2(home, run_inproc):
    for args in (
        ["tokens", "create", "c", "--convoy-max", "-5"],
        ["tokens", "create", "c", "--warn-pct", "101"],
        ["tokens", "create", "c", "--agent-max", "1.5"],
        ["tokens", "create", "bad id"],
        ["tokens", "check", "c", "a", "-1"],
        ["tokens", "check", "c", "a", "ten"],
        ["tokens", "record", "c", "a", "1", "-2"],
        ["tokens", "record", "c", "a", "1", "2", "--check-ref", "xyz"],
        ["tokens", "check", "c", "a"],
        ["tokens", "check", "c\n", "a", "1"],
        ["tokens", "check", "c", "a", "9007199254740992"],
        ["tokens", "check", "c", "a", "\u0661\u0662"],
        ["tokens", "frobnicate"],
    ):
        result = cli(run_inproc, home, *args)
        assert result.code == 2, (args, result.stderr)
        assert result.stderr.splitlines()[-1].startswith("ledger: ")
        assert result.stdout == ""
    assert event_types(home) == []


def test_check_reserves_and_reaching_the_limit_exactly_is_allowed(home, run_inproc):
    cli(
        run_inproc,
        home,
        "tokens",
        "create",
        "c",
        "--convoy-max",
        "1000",
        "--agent-max",
        "500",
        env=at(0),
    )
    first = cli(run_inproc, home, "tokens", "check", "c", "a", "300", env=at(0))
    assert first.code == 0
    body = first.json()
    assert (body["allowed"], body["reason"], body["remaining_tokens"], body["usage_pct"]) == (
        True,
        "ok",
        200,
        30.0,
    )
    assert len(body["check_ref"]) == 64
    assert body["reservation_expires_at"] == "2026-11-22T08:15:00.000000Z"
    over = cli(run_inproc, home, "tokens", "check", "c", "a", "201", env=at(1))
    assert over.code == 1
    refused = over.json()
    assert (refused["allowed"], refused["reason"], refused["remaining_tokens"]) == (
        False,
        "agent_budget_exceeded",
        200,
    )
    assert (refused["usage_pct"], refused["agent_reserved_tokens"]) == (30.0, 300)
    assert refused["reservation_expires_at"] is None
    exact = cli(run_inproc, home, "tokens", "check", "c", "a", "200", env=at(2))
    assert exact.code == 0
    assert (exact.json()["reason"], exact.json()["remaining_tokens"]) == ("warning_threshold", 0)
    # The convoy limit: agent b may use 500 but only 500 are left in the convoy.
    assert cli(run_inproc, home, "tokens", "check", "c", "b", "500", env=at(3)).json()["allowed"]
    convoy = cli(run_inproc, home, "tokens", "check", "c", "d", "1", env=at(4))
    assert (convoy.code, convoy.json()["reason"]) == (1, "convoy_budget_exceeded")
    checks = payloads(home, "tokens.check")
    assert [p["allowed"] for p in checks] == [True, False, True, True, False]
    assert [p["reservation"] is not None for p in checks] == [True, False, True, True, False]
    assert assert_chain_verifies(run_inproc, home) == 6


def test_warning_threshold_at_79_and_80_percent(home, run_inproc):
    cli(
        run_inproc,
        home,
        "tokens",
        "create",
        "c",
        "--convoy-max",
        "1000",
        "--agent-max",
        "1000",
        env=at(0),
    )
    assert cli(run_inproc, home, "tokens", "check", "c", "a", "790").json()["reason"] == "ok"
    cli(run_inproc, home, "tokens", "delete", "c")
    cli(
        run_inproc,
        home,
        "tokens",
        "create",
        "c",
        "--convoy-max",
        "1000",
        "--agent-max",
        "1000",
        env=at(0),
    )
    warn = cli(run_inproc, home, "tokens", "check", "c", "a", "800")
    assert (warn.code, warn.json()["reason"], warn.json()["usage_pct"]) == (
        0,
        "warning_threshold",
        80.0,
    )


def test_record_settles_the_named_reservation(home, run_inproc):
    cli(
        run_inproc,
        home,
        "tokens",
        "create",
        "c",
        "--convoy-max",
        "1000",
        "--agent-max",
        "500",
        env=at(0),
    )
    ref = cli(run_inproc, home, "tokens", "check", "c", "a", "400", env=at(0)).json()["check_ref"]
    assert not cli(run_inproc, home, "tokens", "check", "c", "a", "150", env=at(1)).json()[
        "allowed"
    ]
    recorded = cli(
        run_inproc, home, "tokens", "record", "c", "a", "200", "50", "--check-ref", ref, env=at(2)
    )
    assert recorded.code == 0
    assert recorded.stderr == ""
    assert recorded.json()["settled"] is True
    assert recorded.json()["agent_used_tokens"] == 250
    report = cli(run_inproc, home, "tokens", "report", "c", env=at(3)).json()
    assert (report["total_consumed"], report["reserved_tokens"]) == (250, 0)
    assert (report["agents"][0]["agent"], report["agents"][0]["consumed"]) == ("a", 250)
    assert cli(run_inproc, home, "tokens", "check", "c", "a", "250", env=at(4)).json()["allowed"]
    again = cli(
        run_inproc, home, "tokens", "record", "c", "a", "1", "1", "--check-ref", ref, env=at(5)
    )
    assert again.code == 0
    assert again.json()["settled"] is False
    assert "warning:" in again.stderr
    assert_chain_verifies(run_inproc, home)


def test_record_without_ref_settles_the_oldest_open_reservation(home, run_inproc):
    cli(run_inproc, home, "tokens", "create", "c", "--agent-max", "1000", env=at(0))
    first = cli(run_inproc, home, "tokens", "check", "c", "a", "100", env=at(0)).json()["check_ref"]
    second = cli(run_inproc, home, "tokens", "check", "c", "a", "100", env=at(1)).json()[
        "check_ref"
    ]
    cli(run_inproc, home, "tokens", "check", "c", "b", "100", env=at(2))
    settled = cli(run_inproc, home, "tokens", "record", "c", "a", "90", "0", env=at(3)).json()
    assert settled["settled_ref"] == first
    assert (
        cli(run_inproc, home, "tokens", "record", "c", "a", "90", "0", env=at(4)).json()[
            "settled_ref"
        ]
        == second
    )
    assert (
        cli(run_inproc, home, "tokens", "record", "c", "a", "90", "0", env=at(5)).json()["settled"]
        is False
    )
    report = cli(run_inproc, home, "tokens", "report", "c", env=at(6)).json()
    assert (report["total_consumed"], report["reserved_tokens"]) == (270, 100)  # b's is still open


def test_unknown_convoy_check_is_refused_and_record_is_kept(home, run_inproc):
    check = cli(run_inproc, home, "tokens", "check", "ghost", "a", "1")
    assert check.code == 1
    assert (check.json()["allowed"], check.json()["reason"]) == (False, "unknown_convoy")
    assert check.json()["check_ref"] is not None
    record = cli(run_inproc, home, "tokens", "record", "ghost", "a", "5", "5")
    assert record.code == 0
    assert "no token budget for convoy ghost" in record.stderr
    assert event_types(home) == ["tokens.check", "tokens.record"]


def test_unsettled_reservations_expire_after_the_ttl(home, run_inproc):
    cli(run_inproc, home, "tokens", "create", "c", "--agent-max", "500", env=at(0))
    cli(run_inproc, home, "tokens", "check", "c", "a", "400", env=at(0))
    assert not cli(run_inproc, home, "tokens", "check", "c", "a", "200", env=at(899)).json()[
        "allowed"
    ]
    later = cli(run_inproc, home, "tokens", "check", "c", "a", "200", env=at(900))
    assert later.json()["allowed"] is True
    assert later.json()["agent_reserved_tokens"] == 0
    # A recorded use against an expired check is kept, not settled.
    assert (
        cli(run_inproc, home, "tokens", "report", "c", env=at(2000)).json()["reserved_tokens"] == 0
    )


def test_reservation_ttl_comes_from_config(home, run_inproc):
    env = {"LEDGER_USD_RESERVATION_TTL_SECONDS": "60"}
    cli(run_inproc, home, "tokens", "create", "c", "--agent-max", "500", env=env | at(0))
    body = cli(run_inproc, home, "tokens", "check", "c", "a", "400", env=env | at(0)).json()
    assert body["reservation_expires_at"] == "2026-11-22T08:01:00.000000Z"
    assert cli(run_inproc, home, "tokens", "check", "c", "a", "400", env=env | at(60)).json()[
        "allowed"
    ]


def test_untrusted_derived_state_fails_closed(home, run_inproc):
    cli(run_inproc, home, "tokens", "create", "c")
    cli(run_inproc, home, "tokens", "check", "c", "a", "1")
    state = home / "state" / "derived.json"
    state.write_bytes(state.read_bytes().replace(b'"agent_max":100000', b'"agent_max":999999'))
    refused = cli(run_inproc, home, "tokens", "check", "c", "a", "1")
    assert refused.code == 1
    body = refused.json()
    assert (body["allowed"], body["reason"]) == (False, "counter_inconsistent")
    assert "rebuild-state" in body["diagnostic"]
    assert body["check_ref"] is not None  # the refusal itself is sealed


def test_torn_tail_refuses_without_recording(home, run_inproc):
    cli(run_inproc, home, "tokens", "create", "c")
    with (home / "events.jsonl").open("ab") as chain:
        chain.write(b'{"schema_version": "1.1.0", "cut')
    refused = cli(run_inproc, home, "tokens", "check", "c", "a", "1")
    assert refused.code == 1
    assert refused.json()["allowed"] is False
    assert refused.json()["check_ref"] is None
    assert refused.json()["reason"] == "counter_inconsistent"
    assert "check not recorded" in refused.stderr


def test_eight_cli_processes_never_exceed_one_agents_budget(home, run_inproc):
    cli(run_inproc, home, "tokens", "create", "c", "--agent-max", "100000")
    procs = [popen_ledger(home, "tokens", "check", "c", "a", "30000") for _ in range(8)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        results.append((proc.returncode, out, err))
    allowed = [json.loads(out) for code, out, _ in results if code == 0]
    refused = [json.loads(out) for code, out, _ in results if code == 1]
    assert len(allowed) == 3, results
    assert len(refused) == 5
    assert {body["reason"] for body in refused} == {"agent_budget_exceeded"}
    report = cli(run_inproc, home, "tokens", "report", "c").json()
    assert report["reserved_tokens"] == 90_000
    assert_chain_verifies(run_inproc, home)


_WORKER = textwrap.dedent(
    """
    import sys
    from ledger.runtime import build_runtime
    from ledger.services.agents.tokens import tokens_check
    runtime = build_runtime(sys.argv[1])
    admitted = sum(tokens_check(runtime, "c", "a", 7000).allowed for _ in range(5))
    print(admitted)
    """
)


def test_eight_processes_checking_in_a_loop_admit_exactly_what_fits(home, run_inproc):
    cli(run_inproc, home, "tokens", "create", "c", "--agent-max", "100000")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(home)],
            stdout=subprocess.PIPE,
            text=True,
            env=process_env(),
        )
        for _ in range(8)
    ]
    admitted = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        admitted.append(int(out))
    assert sum(admitted) == 100_000 // 7000  # 14 of 40: never more, and none lost
    checks = payloads(home, "tokens.check")
    assert len(checks) == 40
    reserved = sum(p["reservation"]["tokens"] for p in checks if p["reservation"])
    assert reserved == 14 * 7000 <= 100_000
    assert assert_chain_verifies(run_inproc, home) == 41
