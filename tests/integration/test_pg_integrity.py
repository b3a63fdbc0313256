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
