# ruff: noqa: S608 - schema and role names are the tests' own identifiers
"""What a fleet's database does against edits by SQL (SPEC §8 "Integrity on the shared store").

Every test runs real ``ledger`` processes against the real server the suite
starts (``tests.pg``) and edits the database with real SQL: as the owner of the
tables, and as an ordinary role the way a host connects.
"""

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.integration.test_pg_faults import cli, init_host


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


def copy_fleet_secret(source: Path, target: Path) -> None:
    """What the operator does before ``init`` on a new host: copy the fleet's secret."""
    found = source / "keys" / "fleet.secret"
    if found.exists():
        (target / "keys").mkdir(parents=True, exist_ok=True)
        (target / "keys" / "fleet.secret").write_bytes(found.read_bytes())
        (target / "keys" / "fleet.secret").chmod(0o600)


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
