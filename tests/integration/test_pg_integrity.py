# ruff: noqa: S608 - schema and role names are the tests' own identifiers
"""What a fleet's database does against edits by SQL (SPEC §8 "Integrity on the shared store").

Every test runs real ``ledger`` processes against the real server the suite
starts (``tests.pg``) and edits the database with real SQL: as the owner of the
tables, and as an ordinary role the way a host connects.
"""

import hmac
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.integration.test_pg_faults import cli, init_host
from tests.pg import copy_fleet_secret, store_of_release


def write_root(path: Path) -> Path:
    path.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return path


def files_of(home: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()
    }


def stored_trust(pg_server, schema: str) -> bytes:
    return bytes(pg_server.sql(f'SELECT document FROM "{schema}".trust_store')[0][0])


@pytest.fixture
def root_signed_fleet(pg_server, pg_store_env, tmp_path):
    """Host a enrolled and pinned to an offline root; host b initialised, waiting for the root."""
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    root = write_root(tmp_path / "root.pem")
    first, second = tmp_path / "a", tmp_path / "b"
    init_host(first, pg_server.url, schema)
    pinned = cli(first, "keys", "pin-root", "--root-key", str(root))
    assert pinned.code == 0, pinned.stderr
    copy_fleet_secret(first, second)
    init_host(second, pg_server.url, schema)
    return first, second, root, schema


def test_enrolling_with_a_key_that_is_not_the_fleets_root_is_refused_and_writes_nothing(
    root_signed_fleet, pg_server, tmp_path
):
    first, second, root, schema = root_signed_fleet
    impostor = write_root(tmp_path / "not-the-root.pem")
    trust_before, files_before = stored_trust(pg_server, schema), files_of(second)
    refused = cli(second, "keys", "enroll", "--root-key", str(impostor))
    assert refused.code == 65, refused.stdout + refused.stderr
    assert refused.stderr.startswith("ledger: the given root key did not sign"), refused.stderr
    assert refused.stdout == ""
    assert stored_trust(pg_server, schema) == trust_before
    assert files_of(second) == files_before
    assert cli(first, "verdict", "1").code == 0  # the fleet still trusts only its root
    # The fleet's own root, on a home that pins another one, is refused too.
    pin = second / "trust-root.pub.pem"
    pin.write_bytes(
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    files_before = files_of(second)
    mispinned = cli(second, "keys", "enroll", "--root-key", str(root))
    assert mispinned.code == 65, mispinned.stdout + mispinned.stderr
    assert mispinned.stderr.startswith("ledger: ")  # the stored version fails this home's pin
    assert stored_trust(pg_server, schema) == trust_before
    assert files_of(second) == files_before
    pin.unlink()
    enrolled = cli(second, "keys", "enroll", "--root-key", str(root))
    assert enrolled.code == 0, enrolled.stderr
    assert cli(second, "verdict", "1").code == 0


def test_an_unpinned_host_cannot_re_sign_or_strip_the_root_signature(
    root_signed_fleet, pg_server, tmp_path
):
    _first, second, root, schema = root_signed_fleet
    assert cli(second, "keys", "enroll", "--root-key", str(root)).code == 0
    (second / "trust-root.pub.pem").unlink()  # a host that does not pin the root
    trust_before = stored_trust(pg_server, schema)
    impostor = write_root(tmp_path / "not-the-root.pem")
    repinned = cli(second, "keys", "pin-root", "--root-key", str(impostor))
    assert repinned.code == 65, repinned.stdout + repinned.stderr
    assert "did not sign" in repinned.stderr
    unsigned = cli(second, "keys", "rotate")
    assert unsigned.code == 65, unsigned.stdout + unsigned.stderr
    assert "--root-key" in unsigned.stderr
    assert stored_trust(pg_server, schema) == trust_before
    assert json.loads(trust_before)["root_signature"] is not None


def test_the_chain_and_its_checkpoints_refuse_update_delete_and_truncate_for_every_writer(
    pg_server, pg_store_env, tmp_path
):
    import psycopg

    from tests.integration.test_pg_faults import _grant_roles

    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    home = tmp_path / "host"
    init_host(home, pg_server.url, schema)
    for _ in range(2):
        assert cli(home, "verdict", "1").code == 0
    assert cli(home, "checkpoint").code == 0
    _grant_roles(pg_server, schema)
    # Even granted the rights, and claiming to be recover, an ordinary role is refused.
    pg_server.sql(f'GRANT UPDATE, DELETE, TRUNCATE ON "{schema}".chain TO ledger_app')
    pg_server.sql(f'GRANT UPDATE, DELETE ON "{schema}".checkpoints TO ledger_app')
    edits = [
        f'DELETE FROM "{schema}".chain WHERE seq = 2',
        f'UPDATE "{schema}".chain SET line = line WHERE seq = 1',
        f'TRUNCATE "{schema}".chain',
        f'DELETE FROM "{schema}".checkpoints',
        f'UPDATE "{schema}".checkpoints SET entries = 1',
    ]
    # A writer, even one that sets recover's flag; then the owner's own stray edit.
    for url, flag in ((pg_server.url_for("ledger_app"), "on"), (pg_server.url, "")):
        for statement in edits:
            with psycopg.connect(url) as conn:
                conn.execute(f"SET ledger.recovering = '{flag}'")
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="refused"):
                    conn.execute(statement)
    with psycopg.connect(pg_server.url_for("ledger_app"), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            conn.execute(f"SELECT \"{schema}\".recover_chain(0, 'not mine to call')")
    assert pg_server.sql(f'SELECT count(*) FROM "{schema}".chain') == [(2,)]
    assert pg_server.sql(f'SELECT count(*) FROM "{schema}".checkpoints') == [(1,)]
    assert cli(home, "verify-chain").stdout == "OK 2 entries\n"


def test_a_tail_cut_below_a_checkpoint_is_seen_by_every_host_and_recovered(
    pg_server, pg_store_env, tmp_path
):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    first, second = tmp_path / "a", tmp_path / "b"
    init_host(first, pg_server.url, schema)
    copy_fleet_secret(first, second)
    init_host(second, pg_server.url, schema)
    for _ in range(3):
        assert cli(first, "verdict", "1").code == 0
    checkpoint = cli(first, "checkpoint")
    assert checkpoint.json()["entries"] == 3
    # The owner cuts the head past the guard, then hides its tracks: the note
    # of the change and the derived state that would have been ahead of the chain.
    pg_server.sql_past_the_guard(schema, f'DELETE FROM "{schema}".chain WHERE seq = 3')
    pg_server.sql(f'DELETE FROM "{schema}".chain_tampered')
    pg_server.sql(f'DELETE FROM "{schema}".derived_state')
    for home in (second, first):
        broken = cli(home, "verify-chain")
        assert broken.code == 1, broken.stdout
        assert broken.stderr.startswith("BROKEN line 3: entry missing"), broken.stderr
    for home in (second, first):
        halted = cli(home, "verdict", "1")
        assert halted.code == 1
        assert halted.json()["uncertainty_reason"] == "counter_inconsistent"
        assert "newest checkpoint" in halted.json()["diagnostic"]
    recovered = cli(second, "recover")
    assert recovered.code == 0, recovered.stdout + recovered.stderr
    assert recovered.json()["checkpoints_retired"] == [f"{schema}.evidence"]
    moved = pg_server.sql(f'SELECT seq, reason FROM "{schema}".evidence')
    assert moved == [(3, "a checkpoint of entries no longer in the chain")]
    for home in (second, first):  # 2 kept, the 2 halts sealed since, ledger.recovered
        assert cli(home, "verify-chain").stdout == "OK 5 entries\n"
    for home in (second, first):
        assert cli(home, "verdict", "1").json()["uncertainty_reason"] is None


def test_derived_state_edited_by_sql_halts_until_rebuilt(pg_server, pg_store_env, tmp_path):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    home = tmp_path / "host"
    init_host(home, pg_server.url, schema, "10")
    assert cli(home, "record", "9", "--provider", "openai").code == 0
    assert cli(home, "verdict", "2").json()["verdict"] == "halt-100"
    # One UPDATE that wipes the day's spend from the counters every host reads.
    pg_server.sql(
        f'UPDATE "{schema}".derived_state SET body = convert_to(replace(convert_from(body,'
        " 'UTF8'), '\"openai\":9000000', '\"openai\":0'), 'UTF8')"
    )
    halted = cli(home, "verdict", "2")
    assert halted.code == 1
    assert halted.json()["verdict"] == "halt-uncertainty"
    assert halted.json()["uncertainty_reason"] == "counter_inconsistent"
    assert "does not match its MAC" in halted.json()["diagnostic"]
    assert cli(home, "verify-chain").code == 0  # the chain itself is intact
    rebuilt = cli(home, "rebuild-state")
    assert rebuilt.code == 0, rebuilt.stderr
    usage = cli(home, "usage").json()
    assert usage["usd_used_micros"] == 9_000_000
    assert cli(home, "verdict", "2").json()["verdict"] == "halt-100"


def test_a_forged_idempotency_record_does_not_drop_a_new_record(pg_server, pg_store_env, tmp_path):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    home = tmp_path / "host"
    init_host(home, pg_server.url, schema)
    assert cli(home, "record", "1", "--provider", "openai", "--idempotency-key", "k1").code == 0
    pg_server.sql(
        f"INSERT INTO \"{schema}\".idempotency_keys (key, record) SELECT 'k2',"
        ' convert_to(replace(convert_from(record, \'UTF8\'), \'"key":"k1"\', \'"key":"k2"\'),'
        f" 'UTF8') FROM \"{schema}\".idempotency_keys WHERE key = 'k1'"
    )
    second = cli(home, "record", "3", "--provider", "openai", "--idempotency-key", "k2")
    assert second.code == 0, second.stderr
    assert second.json()["duplicate"] is False
    retried = cli(home, "record", "3", "--provider", "openai", "--idempotency-key", "k2")
    assert retried.json()["duplicate"] is True  # the planted row gave way to the real one
    assert cli(home, "usage").json()["usd_used_micros"] == 4_000_000
    again = cli(home, "record", "1", "--provider", "openai", "--idempotency-key", "k1")
    assert again.json()["duplicate"] is True  # a genuine record is still found


def test_a_host_joins_only_with_the_fleets_secret(pg_server, pg_store_env, tmp_path):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    first, second = tmp_path / "a", tmp_path / "b"
    made = cli(first, "init", "--daily-cap-usd", "50", LEDGER_STORE_URL=pg_server.url,
               LEDGER_STORE_SCHEMA=schema)  # fmt: skip
    assert made.code == 0, made.stderr
    assert made.json()["created_fleet_secret"] is True
    assert "copy it" in made.stderr
    secret = first / "keys" / "fleet.secret"
    assert secret.stat().st_mode & 0o777 == 0o600
    assert len(secret.read_bytes()) == 32
    check = hmac.new(secret.read_bytes(), b"ledger fleet secret check v1", "sha256")
    stored = pg_server.sql(
        f'SELECT count(*) FROM "{schema}".fleet_secret WHERE check_value = %s',
        (check.hexdigest(),),
    )
    assert stored == [(1,)]
    # The secret itself is nowhere in the database.
    dump = pg_server.sql(
        f'SELECT count(*) FROM "{schema}".trust_store, "{schema}".derived_state'
        " WHERE position(%s in document) > 0 OR position(%s in body) > 0",
        (secret.read_bytes(), secret.read_bytes()),
    )
    assert dump == [(0,)]
    env = {"LEDGER_STORE_URL": pg_server.url, "LEDGER_STORE_SCHEMA": schema}
    refused = cli(second, "init", "--daily-cap-usd", "50", **env)
    assert refused.code == 65, refused.stdout + refused.stderr
    assert f"no fleet secret at {second / 'keys' / 'fleet.secret'}" in refused.stderr
    (second / "keys").mkdir(exist_ok=True)
    (second / "keys" / "fleet.secret").write_bytes(b"\x01" * 32)
    (second / "keys" / "fleet.secret").chmod(0o600)
    wrong = cli(second, "init", **env)
    assert wrong.code == 65
    assert "is not this fleet's secret" in wrong.stderr
    trust = json.loads(stored_trust(pg_server, schema))
    assert len(trust["keys"]) == 1  # neither attempt enrolled a key
    copy_fleet_secret(first, second)
    joined = cli(second, "init", **env)
    assert joined.code == 0, joined.stderr
    assert joined.json()["created_fleet_secret"] is False
    assert cli(second, "verdict", "1").code == 0
    assert cli(first, "verdict", "1").code == 0


def test_a_host_that_lost_the_secret_halts_but_still_records_spend(
    pg_server, pg_store_env, tmp_path
):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    home = tmp_path / "host"
    init_host(home, pg_server.url, schema)
    assert cli(home, "verdict", "1").code == 0
    secret = home / "keys" / "fleet.secret"
    kept = secret.read_bytes()
    secret.chmod(0o644)
    loose = cli(home, "verdict", "1")
    assert loose.json()["uncertainty_reason"] == "counter_inconsistent"
    assert "accessible by others" in loose.json()["diagnostic"]
    secret.unlink()
    halted = cli(home, "verdict", "1")
    assert halted.code == 1
    assert halted.json()["uncertainty_reason"] == "counter_inconsistent"
    assert f"no fleet secret at {secret}" in halted.json()["diagnostic"]
    recorded = cli(home, "record", "2", "--provider", "openai")
    assert recorded.code == 0, recorded.stderr
    assert recorded.json()["recorded"] is True  # spend is never refused
    secret.write_bytes(kept)
    secret.chmod(0o600)
    usage = cli(home, "usage").json()
    assert usage["uncertainty_reason"] is None
    assert usage["usd_used_micros"] == 2_000_000


def test_a_version_1_schema_is_refused_until_init_upgrades_it(pg_server, pg_store_env, tmp_path):
    import psycopg

    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    store_of_release(pg_server.url, schema, 1)  # a fleet made by the previous release
    home = tmp_path / "host"
    home.mkdir()
    (home / "ledger.toml").write_text(
        f'[usd]\ndaily_cap = 50\n[store]\nurl = "{pg_server.url}"\nschema = "{schema}"\n'
    )
    halted = cli(home, "verdict", "1")
    assert halted.code == 1
    assert "schema version 1, older than this ledger needs (5)" in halted.json()["diagnostic"]
    upgraded = cli(home, "init")
    assert upgraded.code == 0, upgraded.stderr
    assert upgraded.json()["created_schema"] is False
    versions = pg_server.sql(f'SELECT version FROM "{schema}".schema_version ORDER BY version')
    assert versions == [(1,), (5,)]
    assert cli(home, "verdict", "1").code == 0
    with psycopg.connect(pg_server.url) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="refused"):
            conn.execute(f'DELETE FROM "{schema}".chain')


def test_replacing_the_fleet_secret_as_the_runbook_says(pg_server, pg_store_env, tmp_path):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    first, second = tmp_path / "a", tmp_path / "b"
    init_host(first, pg_server.url, schema)
    copy_fleet_secret(first, second)
    init_host(second, pg_server.url, schema)
    assert cli(second, "record", "4", "--provider", "openai").code == 0
    for table in ("fleet_secret", "derived_state", "idempotency_keys"):
        pg_server.sql(f'DELETE FROM "{schema}".{table}')
    old = (first / "keys" / "fleet.secret").read_bytes()
    (first / "keys" / "fleet.secret").unlink()
    renewed = cli(first, "init", LEDGER_STORE_URL=pg_server.url, LEDGER_STORE_SCHEMA=schema)
    assert renewed.code == 0, renewed.stderr
    assert renewed.json()["created_fleet_secret"] is True
    assert (first / "keys" / "fleet.secret").read_bytes() != old
    assert cli(first, "verdict", "1").code == 0  # state rebuilt under the new secret
    stale = cli(second, "verdict", "1")
    assert stale.json()["uncertainty_reason"] == "counter_inconsistent"
    assert "is not this fleet's secret" in stale.json()["diagnostic"]
    copy_fleet_secret(first, second)
    usage = cli(second, "usage").json()
    assert usage["uncertainty_reason"] is None
    assert usage["usd_used_micros"] == 4_000_000


def test_an_old_checkpoint_replayed_as_the_newest_fails_closed_and_is_recovered(
    pg_server, pg_store_env, tmp_path
):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    first, second = tmp_path / "a", tmp_path / "b"
    init_host(first, pg_server.url, schema)
    copy_fleet_secret(first, second)
    init_host(second, pg_server.url, schema)
    for _ in range(2):
        assert cli(first, "verdict", "1").code == 0
    assert cli(first, "checkpoint").code == 0
    for _ in range(2):
        assert cli(first, "verdict", "1").code == 0
    assert cli(first, "checkpoint").code == 0
    # Cut the tail past the guard, and put the old checkpoint in front of the new
    # one with a row that claims more entries than its document vouches for.
    pg_server.sql_past_the_guard(schema, f'DELETE FROM "{schema}".chain WHERE seq > 2')
    for table in ("chain_tampered", "derived_state"):
        pg_server.sql(f'DELETE FROM "{schema}".{table}')
    pg_server.sql(
        f'INSERT INTO "{schema}".checkpoints (entries, head_hash, document)'
        f' SELECT 1000, head_hash, document FROM "{schema}".checkpoints WHERE entries = 2'
    )
    halted = cli(second, "verdict", "1")
    assert halted.code == 1
    assert halted.json()["uncertainty_reason"] == "counter_inconsistent"
    assert "claims 1000 entries but vouches for 2" in halted.json()["diagnostic"]
    refused = cli(second, "verify-chain")
    assert refused.code == 65
    assert refused.stderr.startswith("ledger: the newest checkpoint in")
    assert "claims 1000 entries" in refused.stderr
    recovered = cli(second, "recover")
    assert recovered.code == 0, recovered.stdout + recovered.stderr
    moved = pg_server.sql(f'SELECT seq FROM "{schema}".evidence ORDER BY seq')
    assert moved == [(4,), (1000,)]  # the two checkpoints vouching for lost entries
    # The 2 kept, the halt sealed since, ledger.recovered.
    assert cli(second, "verify-chain").stdout == "OK 4 entries\n"
    assert cli(second, "verdict", "1").json()["uncertainty_reason"] is None
