# ruff: noqa: S608 - schema and role names are the tests' own identifiers
"""A fleet's store when things go wrong (SPEC §8): a server stopped mid-run, clients
killed mid-transaction, a role without UPDATE or DELETE, recovery into the
evidence table.

Commands run as real processes where a crash or a lost server is the point.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import clean_env, run_process
from tests.gate_helpers import CAP_ENV, at, chain_lines
from tests.pg import PgServer, copy_fleet_secret

REPO = Path(__file__).resolve().parents[2]


def init_host(home: Path, url: str, schema: str, cap: str = "50") -> None:
    result = run_process(
        ["--home", str(home), "init", "--daily-cap-usd", cap],
        clean_env(LEDGER_STORE_URL=url, LEDGER_STORE_SCHEMA=schema),
    )
    assert result.code == 0, result.stderr


def cli(home: Path, *args: str, **env: str):
    return run_process(["--home", str(home), *args], clean_env(LEDGER_NOW=at(0), **CAP_ENV, **env))


def record_keys(home: Path) -> list[str]:
    return [
        json.loads(line)["payload"]["idempotency_key"]
        for line in chain_lines(home)
        if json.loads(line)["event_type"] == "budget.record_call"
    ]


def test_server_stopped_mid_run_halts_verdicts_spools_records_and_drains_each_once(
    own_pg_server, tmp_path
):
    home = tmp_path / "host"
    init_host(home, own_pg_server.url, "fleet")
    assert cli(home, "verdict", "1").code == 0
    acknowledged: list[tuple[str, dict[str, object]]] = []
    failures: list[str] = []
    stop_after = 6

    def records() -> None:
        for number in range(14):
            key = f"call-{number}"
            result = cli(home, "record", "0.5", "--provider", "openai", "--idempotency-key", key)
            if result.code != 0:
                failures.append(f"{key}: exit {result.code}: {result.stderr}")
                return
            acknowledged.append((key, result.json()))

    worker = threading.Thread(target=records)
    worker.start()
    deadline = time.monotonic() + 120
    while len(acknowledged) < stop_after and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    own_pg_server.stop("immediate")
    worker.join(timeout=120)
    assert not worker.is_alive()
    assert not failures, failures
    assert len(acknowledged) == 14
    spooled = [key for key, document in acknowledged if document.get("spooled")]
    assert spooled, acknowledged
    assert all(document["entry_hash"] is None for key, document in acknowledged if key in spooled)
    # Without a key the record still spools, with a key of its own.
    keyless = cli(home, "record", "0.25", "--provider", "openai")
    assert keyless.code == 0
    assert keyless.json()["spooled"] is True
    made_up = keyless.json()["idempotency_key"]
    assert made_up
    # Verdicts halt naming the store; usage counts the spooled spend and writes nothing.
    halted = cli(home, "verdict", "1")
    assert halted.code == 1
    assert halted.json()["uncertainty_reason"] == "counter_inconsistent"
    assert own_pg_server.root.name in halted.json()["diagnostic"]
    spool_files = sorted(p.name for p in (home / "spool").iterdir())
    assert len(spool_files) == len(spooled) + 1
    own_pg_server.start()
    drained = cli(home, "verdict", "1")
    assert drained.code == 0, drained.stdout + drained.stderr
    assert list((home / "spool").iterdir()) == []
    keys = record_keys(home)
    assert sorted(keys) == sorted([key for key, _doc in acknowledged] + [made_up])
    assert len(keys) == len(set(keys))
    again = cli(home, "record", "0.5", "--provider", "openai", "--idempotency-key", spooled[0])
    assert again.json()["duplicate"] is True
    usage = cli(home, "usage").json()
    assert usage["usd_used_micros"] == 500_000 * 14 + 250_000
    assert cli(home, "verify-chain").code == 0


def test_usage_counts_spooled_spend_while_the_store_is_down(own_pg_server, tmp_path):
    home = tmp_path / "host"
    init_host(home, own_pg_server.url, "fleet")
    assert cli(home, "record", "2", "--provider", "openai").json()["recorded"] is True
    own_pg_server.stop("immediate")
    assert cli(home, "record", "3", "--provider", "openai").json()["spooled"] is True
    before = sorted(p.name for p in home.rglob("*"))
    usage = cli(home, "usage")
    assert usage.code == 0, usage.stderr
    assert usage.json()["uncertainty_reason"] == "counter_inconsistent"
    assert usage.json()["usd_used_micros"] == 3_000_000  # the spooled record
    assert sorted(p.name for p in home.rglob("*")) == before
    own_pg_server.start()
    usage = cli(home, "usage").json()
    assert usage["usd_used_micros"] == 5_000_000  # spooled spend counted, not yet sealed
    assert len(record_keys(home)) == 1
    assert cli(home, "verdict", "1").code == 0
    assert len(record_keys(home)) == 2
    assert cli(home, "usage").json()["usd_used_micros"] == 5_000_000


_LOOP = """
import sys
from pathlib import Path
from ledger.runtime import Runtime
from ledger.services.gate.gate import check_verdict
from ledger.services.gate.recording import record_call
runtime = Runtime(Path(sys.argv[1]), {"LEDGER_NOW": sys.argv[2], "LEDGER_BILLING_STALE_HALT_PCT": "100"})
print("ready", flush=True)
while True:
    outcome = check_verdict(runtime, 1000)
    if outcome.verdict_ref is not None:
        record_call(runtime, 900, "openai", verdict_ref=outcome.verdict_ref)
        print("recorded", flush=True)
"""

ROUNDS = 4
RECORDS_PER_ROUND = 3
"""Each client is killed only after it has recorded this many calls in the round: the
chain grows by a known amount however slow the machine, not by what a fixed sleep
allowed."""


def test_clients_killed_mid_transaction_leave_no_partial_entry(pg_server, pg_store_env, tmp_path):
    homes: list[Path] = []
    for index in range(3):
        home = tmp_path / f"host{index}"
        if homes:
            copy_fleet_secret(homes[0], home)
        init_host(
            home, pg_store_env["LEDGER_STORE_URL"], pg_store_env["LEDGER_STORE_SCHEMA"], "1000"
        )
        homes.append(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    for round_number in range(ROUNDS):
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _LOOP, str(home), at(round_number)],
                stdout=subprocess.PIPE,
                env=env,
                cwd=REPO,
            )
            for home in homes
        ]
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == b"ready"
        for proc in procs:
            assert proc.stdout is not None
            for _ in range(RECORDS_PER_ROUND):
                assert proc.stdout.readline().strip() == b"recorded"
        # The clients go on looping while they are killed one after the other, so each
        # dies wherever it is: often inside a verdict's or a record's transaction.
        for proc in procs:
            proc.send_signal(signal.SIGKILL)
            time.sleep(0.05)
        for proc in procs:
            proc.wait(timeout=30)
            assert proc.stdout is not None
            proc.stdout.close()
    verified = cli(homes[0], "verify-chain")
    assert verified.code == 0, verified.stderr
    entries = int(verified.stdout.split()[1])
    assert entries > len(homes) * ROUNDS * RECORDS_PER_ROUND
    before = cli(homes[1], "usage").json()
    assert before["uncertainty_reason"] is None, before
    rebuilt = cli(homes[2], "rebuild-state")
    assert rebuilt.code == 0, rebuilt.stderr
    after = cli(homes[1], "usage").json()
    for field in ("usd_used_micros", "usd_reserved_micros"):
        assert after[field] == before[field]
    assert cli(homes[0], "verdict", "0.01").json()["uncertainty_reason"] is None


def _grant_roles(server: PgServer, schema: str) -> None:
    for role in ("ledger_app", "ledger_recover"):
        server.sql(
            f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}')"
            f" THEN CREATE ROLE {role} LOGIN; END IF; END $$"
        )
    statements = [
        f'GRANT USAGE ON SCHEMA "{schema}" TO ledger_app, ledger_recover',
        f'GRANT SELECT, INSERT ON "{schema}".chain TO ledger_app',
        f'GRANT SELECT ON "{schema}".schema_version, "{schema}".chain_tampered TO ledger_app',
        (
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{schema}".derived_state,'
            f' "{schema}".idempotency_keys, "{schema}".trust_store TO ledger_app'
        ),
        f'GRANT SELECT, INSERT ON "{schema}".checkpoints, "{schema}".segments TO ledger_app',
        f'GRANT USAGE ON SEQUENCE "{schema}".checkpoints_id_seq TO ledger_app',
        f'GRANT SELECT ON "{schema}".fleet_secret TO ledger_app',
        f'GRANT SELECT, INSERT, UPDATE ON "{schema}".gateway_keys TO ledger_app',
        "GRANT ledger_app TO ledger_recover",
        f'GRANT EXECUTE ON FUNCTION "{schema}".recover_chain(bigint, text) TO ledger_recover',
    ]
    for statement in statements:
        server.sql(statement)


def test_a_role_without_update_or_delete_runs_every_command_but_recover(
    pg_server, pg_store_env, tmp_path
):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    admin = tmp_path / "admin"
    init_host(admin, pg_server.url, schema, "100")  # the schema is created by its owner
    _grant_roles(pg_server, schema)
    app_url = pg_server.url_for("ledger_app")
    home = tmp_path / "host"
    copy_fleet_secret(admin, home)
    init_host(home, app_url, schema, "100")  # enrols with the app role
    steps = [
        ("verdict", "2"),
        ("record", "1.5", "--provider", "openai", "--idempotency-key", "k-1"),
        ("record", "1.5", "--provider", "openai", "--idempotency-key", "k-1"),
        ("usage",),
        ("verify-chain",),
        ("checkpoint",),
        ("snapshot",),
        ("export",),
        ("rebuild-state",),
        ("keys", "rotate"),
        ("verdict", "1"),
        ("tokens", "create", "convoy-a"),
        ("tokens", "check", "convoy-a", "agent-1", "100"),
        ("keys", "issue", "ci"),
        ("keys", "list"),
        ("keys", "revoke-gateway", "ci"),
        ("recover", "--dry-run"),
        ("recover",),  # a chain that verifies is left alone: nothing to write
    ]
    for step in steps:
        result = cli(home, *step)
        assert result.code == 0, (step, result.stdout, result.stderr)
    import psycopg

    with psycopg.connect(app_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            conn.execute(f'DELETE FROM "{schema}".chain WHERE seq = 1')
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            conn.execute(f'UPDATE "{schema}".chain SET line = line WHERE seq = 1')
    pg_server.sql_past_the_guard(schema, f'DELETE FROM "{schema}".chain WHERE seq = 3')
    assert cli(home, "verdict", "1").code == 1
    refused = cli(home, "recover")
    assert refused.code == 74, refused.stdout + refused.stderr
    assert "permission denied" in refused.stderr
    recovered = cli(home, "recover", LEDGER_STORE_URL=pg_server.url_for("ledger_recover"))
    assert recovered.code == 0, recovered.stdout + recovered.stderr
    report = recovered.json()
    assert report["first_lost_line"] == 3
    evidence = pg_server.sql(f'SELECT seq FROM "{schema}".evidence ORDER BY seq')
    assert evidence
    assert evidence[0][0] == 4
    assert cli(home, "verify-chain").code == 0
    assert cli(home, "verdict", "1").json()["uncertainty_reason"] is None


def test_recover_moves_bad_rows_to_evidence_and_keeps_the_longest_valid_prefix(
    pg_server, pg_store_env, tmp_path
):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    home = tmp_path / "host"
    init_host(home, pg_server.url, schema, "100")
    for _ in range(3):
        assert cli(home, "verdict", "1").code == 0
    assert cli(home, "snapshot").code == 0
    for _ in range(3):
        assert cli(home, "verdict", "1").code == 0
    pg_server.sql_past_the_guard(
        schema,
        f"UPDATE \"{schema}\".chain SET line = convert_to(replace(convert_from(line, 'UTF8'),"
        " '\"estimated_micros\":1000000', '\"estimated_micros\":1'), 'UTF8') WHERE seq = 6",
    )
    assert cli(home, "verify-chain").stderr.startswith("BROKEN line 6:")
    dry = cli(home, "recover", "--dry-run")
    assert dry.code == 0
    assert dry.json()["dry_run"] is True
    assert pg_server.sql(f'SELECT count(*) FROM "{schema}".evidence') == [(0,)]
    result = cli(home, "recover")
    assert result.code == 0, result.stdout + result.stderr
    report = result.json()
    assert report["restored_entries"] == 5
    assert report["first_lost_line"] == 6
    moved = pg_server.sql(f'SELECT seq, reason FROM "{schema}".evidence ORDER BY seq')
    assert [row[0] for row in moved] == [6, 7]
    assert cli(home, "verify-chain").stdout == "OK 6 entries\n"
    assert json.loads(chain_lines(home)[-1])["event_type"] == "ledger.recovered"
    assert cli(home, "verdict", "1").json()["uncertainty_reason"] is None


def test_the_daemons_spool_job_seals_what_was_spooled_and_keeps_one_connection(
    own_pg_server, tmp_path
):
    from ledger.daemon.jobs import spool_job
    from ledger.edges.postgres.connection import close_all
    from ledger.runtime import Runtime

    home = tmp_path / "host"
    init_host(home, own_pg_server.url, "fleet")
    own_pg_server.stop("immediate")
    assert cli(home, "record", "4", "--provider", "openai").json()["spooled"] is True
    own_pg_server.start()
    env = {"LEDGER_NOW": at(0), **CAP_ENV}
    try:
        spool_job(lambda: Runtime(home, dict(env)))
        assert list((home / "spool").iterdir()) == []
        assert len(record_keys(home)) == 1
        spool_job(lambda: Runtime(home, dict(env)))  # nothing left: nothing written
        assert len(record_keys(home)) == 1
        backends = own_pg_server.sql(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'ledger'"
        )
        assert backends == [(1,)]
    finally:
        close_all()
