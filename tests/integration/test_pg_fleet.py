# ruff: noqa: S608 - schema names are the tests' own identifiers
"""A fleet on one PostgreSQL database (SPEC §8): hosts, schema, one cap across processes.

Every test runs against a real server the suite starts (``tests.pg``) in a
schema of its own; nothing of the database is mocked.
"""

import json
import multiprocessing
import time
from pathlib import Path

import pytest

from tests.gate_helpers import CAP_ENV, at, chain_lines, merge_counts, verdict_worker
from tests.helpers.folds import folds
from tests.pg import copy_fleet_secret

__all__ = ["folds"]  # the fixture, used by name


@pytest.fixture
def fleet(tmp_path, run_inproc, pg_store_env):
    """``fleet(n)``: n host homes on one schema, each with its own key; a runner per host."""

    def make(count: int, cap: str = "50"):
        homes: list[Path] = []
        for index in range(count):
            path = tmp_path / f"host{index}"
            if homes:
                copy_fleet_secret(homes[0], path)
            result = run_inproc(
                ["--home", str(path), "init", "--daily-cap-usd", cap], dict(pg_store_env)
            )
            assert result.code == 0, result.stderr
            homes.append(path)
        return homes

    return make


def host(run_inproc, home: Path):
    def run(*args: str, env: dict[str, str] | None = None):
        return run_inproc(
            ["--home", str(home), *args], {"LEDGER_NOW": at(0), **CAP_ENV, **(env or {})}
        )

    return run


def test_init_creates_the_schema_once_and_enrols_each_host(
    fleet, run_inproc, pg_store_env, pg_server
):
    homes = fleet(3)
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    assert pg_server.sql(f'SELECT version FROM "{schema}".schema_version') == [(5,)]
    trust = json.loads(bytes(pg_server.sql(f'SELECT document FROM "{schema}".trust_store')[0][0]))
    assert len(trust["keys"]) == 3
    again = run_inproc(["--home", str(homes[0]), "init"], {})
    assert again.code == 0, again.stderr
    document = again.json()
    assert document["created_schema"] is False
    assert document["created_key"] is False
    assert document["enrolled"] is True
    assert "[store]" in (homes[0] / "ledger.toml").read_text()
    trust_after = json.loads(
        bytes(pg_server.sql(f'SELECT document FROM "{schema}".trust_store')[0][0])
    )
    assert trust_after == trust


def test_a_newer_schema_is_refused_with_a_clear_error(fleet, run_inproc, pg_store_env, pg_server):
    (home,) = fleet(1)
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    pg_server.sql(f'INSERT INTO "{schema}".schema_version (version) VALUES (6)')
    from ledger.edges.postgres.connection import close_all

    close_all()
    result = host(run_inproc, home)("verdict", "1")
    assert result.code == 1
    assert result.json()["uncertainty_reason"] == "counter_inconsistent"
    assert "schema version 6, newer than this ledger knows (5)" in result.json()["diagnostic"]
    again = run_inproc(["--home", str(home), "init"], {})
    assert again.code == 74
    assert "newer than this ledger knows" in again.stderr


def test_hosts_share_one_chain_and_one_counter(fleet, run_inproc):
    first, second = fleet(2)
    a, b = host(run_inproc, first), host(run_inproc, second)
    ref = a("verdict", "10").json()["verdict_ref"]
    assert b("record", "7", "--provider", "openai", "--verdict-ref", ref).json()["settled"] is True
    usage = a("usage").json()
    assert usage["usd_used"] == 7
    assert usage["usd_reserved"] == 0
    keys = {json.loads(line)["signing_key_id"] for line in chain_lines(first)}
    assert len(keys) == 2  # each host signs with its own key
    assert a("verify-chain").stdout == "OK 2 entries\n"
    assert b("verify-chain").stdout == "OK 2 entries\n"


def test_a_host_enrolling_leaves_the_fleets_state_standing(
    tmp_path, fleet, run_inproc, pg_store_env, folds
):
    """One key more fails no verified row: no host verifies the fleet's chain again for it."""
    (first,) = fleet(1)
    a = host(run_inproc, first)
    for _ in range(3):
        assert a("verdict", "1").code == 0
    second = tmp_path / "host-late"
    copy_fleet_secret(first, second)
    joined = run_inproc(
        ["--home", str(second), "init", "--daily-cap-usd", "50"], dict(pg_store_env)
    )
    assert joined.code == 0, joined.stderr
    assert joined.json()["enrolled"] is True
    folds.clear()
    assert a("verdict", "1").code == 0
    assert host(run_inproc, second)("verdict", "1").code == 0
    # The fleet's state is written with each row, so it is at the head: nothing to fold.
    assert folds == []
    assert a("verify-chain").stdout == "OK 5 entries\n"


def test_four_hosts_25_concurrent_verdicts_each_admit_exactly_49_of_a_50_dollar_cap(
    fleet, tmp_path, run_inproc
):
    homes = fleet(4)
    go = tmp_path / "go"
    env = {"LEDGER_NOW": at(0), **CAP_ENV}
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        pending = [
            pool.apply_async(verdict_worker, (str(home), env, 25, str(go))) for home in homes
        ]
        time.sleep(1.0)  # let every worker import and wait at the gate
        go.write_text("go")
        counts = merge_counts([job.get(timeout=240) for job in pending])
    admitted = counts.get("allow", 0) + counts.get("warn-90", 0)
    assert admitted == 49, counts
    assert counts.get("halt-100", 0) == 51, counts
    run = host(run_inproc, homes[0])
    assert run("verify-chain").stdout == "OK 100 entries\n"
    usage = run("usage").json()
    assert usage["usd_reserved_micros"] == 49_000_000
    assert usage["uncertainty_reason"] is None


def test_export_writes_the_stored_bytes_that_verify_offline(
    fleet, run_inproc, tmp_path, pg_store_env, pg_server
):
    first, second = fleet(2)
    a, b = host(run_inproc, first), host(run_inproc, second)
    for amount in ("1", "2", "3"):
        a("verdict", amount)
        b("record", amount, "--provider", "openai")
    exported = a("export")
    assert exported.code == 0, exported.stderr
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    rows = pg_server.sql(f'SELECT line FROM "{schema}".chain ORDER BY seq')
    assert exported.stdout.encode() == b"".join(bytes(row[0]) for row in rows)
    log = tmp_path / "fleet.jsonl"
    log.write_text(exported.stdout)
    keys = []
    for home in (first, second):
        keys += ["--key", str(next((home / "keys").glob("*.pub.pem")))]
    verified = run_inproc(["verify-chain", str(log), *keys, "--strict"])
    assert verified.stdout == "OK 6 entries\n", verified.stderr
    tail = a("export", "--since", "4")
    assert tail.stdout.encode() == b"".join(bytes(row[0]) for row in rows[4:])


def test_verify_chain_streams_the_database_chain_and_names_a_row_edited_by_sql(
    fleet, run_inproc, pg_store_env, pg_server
):
    (home,) = fleet(1)
    run = host(run_inproc, home)
    for _ in range(5):
        assert run("verdict", "1").code == 0
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    pg_server.sql_past_the_guard(
        schema,
        f"UPDATE \"{schema}\".chain SET line = convert_to(replace(convert_from(line, 'UTF8'),"
        " '\"estimated_micros\":1000000', '\"estimated_micros\":1000'), 'UTF8') WHERE seq = 3",
    )
    broken = run("verify-chain")
    assert broken.code == 1
    assert broken.stderr.startswith("BROKEN line 3:"), broken.stderr
    halted = run("verdict", "1")
    assert halted.code == 1
    assert halted.json()["uncertainty_reason"] == "counter_inconsistent"
    assert "changed outside an append" in halted.json()["diagnostic"]


def test_a_row_deleted_by_sql_breaks_the_chain_at_that_line_and_halts_the_gate(
    fleet, run_inproc, pg_store_env, pg_server
):
    (home,) = fleet(1)
    run = host(run_inproc, home)
    for _ in range(4):
        assert run("verdict", "1").code == 0
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    pg_server.sql_past_the_guard(schema, f'DELETE FROM "{schema}".chain WHERE seq = 2')
    broken = run("verify-chain")
    assert broken.code == 1
    assert broken.stderr.startswith("BROKEN line 2:"), broken.stderr
    halted = run("verdict", "1")
    assert halted.json()["uncertainty_reason"] == "counter_inconsistent"
    usage = run("usage")
    assert usage.json()["uncertainty_reason"] == "counter_inconsistent"


def test_an_unreachable_store_halts_naming_it_within_the_lock_timeout(
    tmp_path, run_inproc, pg_store_env
):
    (tmp_path / "nowhere").mkdir()
    url = f"postgresql://postgres@/postgres?host={tmp_path / 'nowhere'}"
    home = tmp_path / "home"
    (home).mkdir()
    (home / "ledger.toml").write_text(
        f'[usd]\ndaily_cap = 50\n[chain]\nlock_timeout_seconds = 2\n[store]\nurl = "{url}"\n'
    )
    started = time.monotonic()
    result = run_inproc(["--home", str(home), "verdict", "1"], {"LEDGER_NOW": at(0)})
    assert time.monotonic() - started < 2.5
    assert result.code == 1
    document = result.json()
    assert document["verdict"] == "halt-uncertainty"
    assert document["uncertainty_reason"] == "counter_inconsistent"
    assert str(tmp_path / "nowhere") in document["diagnostic"]
    assert "unreachable" in document["diagnostic"]


def test_a_server_that_never_answers_is_given_up_on_within_the_lock_timeout(tmp_path, run_inproc):
    import socket

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts the connection, never speaks
    try:
        port = listener.getsockname()[1]
        home = tmp_path / "home"
        home.mkdir()
        (home / "ledger.toml").write_text(
            "[usd]\ndaily_cap = 50\n[chain]\nlock_timeout_seconds = 2\n"
            f'[store]\nurl = "postgresql://ledger@127.0.0.1:{port}/ledger"\n'
        )
        started = time.monotonic()
        result = run_inproc(["--home", str(home), "verdict", "1"], {"LEDGER_NOW": at(0)})
        elapsed = time.monotonic() - started
    finally:
        listener.close()
    assert result.code == 1
    assert result.json()["uncertainty_reason"] == "counter_inconsistent"
    assert "127.0.0.1" in result.json()["diagnostic"]
    assert elapsed < 3.5, elapsed


def test_enrolment_into_a_root_signed_trust_store_needs_the_root(
    tmp_path, run_inproc, pg_store_env, pg_server
):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    root = tmp_path / "root.pem"
    root.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    root.chmod(0o600)
    first, second = tmp_path / "a", tmp_path / "b"
    made = run_inproc(["--home", str(first), "init", "--daily-cap-usd", "50"], dict(pg_store_env))
    assert made.code == 0, made.stderr
    pinned = run_inproc(["--home", str(first), "keys", "pin-root", "--root-key", str(root)])
    assert pinned.code == 0, pinned.stderr
    copy_fleet_secret(first, second)
    joined = run_inproc(
        ["--home", str(second), "init", "--daily-cap-usd", "50"], dict(pg_store_env)
    )
    assert joined.code == 0, joined.stderr
    assert joined.json()["enrolled"] is False
    assert "keys enroll --root-key" in joined.stderr
    a, b = host(run_inproc, first), host(run_inproc, second)
    assert b("verdict", "1").code == 1  # no enrolled key: nothing can be sealed
    refused = b("keys", "enroll")
    assert refused.code == 65
    assert "--root-key" in refused.stderr
    enrolled = b("keys", "enroll", "--root-key", str(root))
    assert enrolled.code == 0, enrolled.stderr
    assert enrolled.json()["enrolled"] is True
    assert enrolled.json()["root_signed"] is True
    assert (second / "trust-root.pub.pem").exists()
    assert b("keys", "enroll").json()["already_enrolled"] is True
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    document = json.loads(
        bytes(pg_server.sql(f'SELECT document FROM "{schema}".trust_store')[0][0])
    )
    assert document["root_signature"] is not None
    assert len(document["keys"]) == 2
    assert b("verdict", "1").code == 0
    assert a("verdict", "1").code == 0
    assert a("verify-chain").stdout == "OK 2 entries\n"


def test_keys_enroll_without_a_store_is_a_bad_command_line(home, run_inproc):
    result = run_inproc(["--home", str(home), "keys", "enroll"])
    assert result.code == 2
    assert "store.url is not set" in result.stderr
