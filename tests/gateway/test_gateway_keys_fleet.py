# ruff: noqa: S608 - schema names are the tests' own identifiers
"""Gateway keys on a fleet (SPEC §8, §12): kept in the store, so every host sees the same keys.

Real `ledger` processes on two host homes sharing one schema of a real
PostgreSQL server (``tests.pg``); nothing of the database is mocked.
"""

import hashlib
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ledger.errors import GatewayKeyError
from ledger.runtime import Runtime
from ledger.services.gateway_keys import resolve_gateway_key
from tests.conftest import clean_env, run_process
from tests.gateway.helpers import (
    NOW,
    anthropic_body,
    start_proxy,
    write_config,
)
from tests.integration.test_pg_faults import init_host
from tests.pg import copy_fleet_secret, store_of_release

pytestmark = pytest.mark.timeout(180)


def keys(home: Path, *args: str):
    return run_process(["--home", str(home), "keys", *args], clean_env(LEDGER_NOW=NOW))


@pytest.fixture
def hosts(pg_server, pg_store_env, tmp_path) -> tuple[Path, Path]:
    """Two hosts of one fleet: A made the schema, B joined it."""
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    first, second = tmp_path / "a", tmp_path / "b"
    init_host(first, pg_server.url, schema)
    copy_fleet_secret(first, second)
    init_host(second, pg_server.url, schema)
    return first, second


def test_a_key_issued_on_one_host_resolves_on_another_and_a_revocation_reaches_both(
    hosts, pg_server, pg_store_env
):
    first, second = hosts
    issued = keys(first, "issue", "ci", "--agent", "ci-bot", "--tag", "team:infra")
    assert issued.code == 0, issued.stderr
    secret = issued.json()["key"]
    listed = keys(second, "list")
    assert listed.code == 0, listed.stderr
    (shown,) = listed.json()["keys"]
    assert (shown["name"], shown["agent"], shown["tags"], shown["state"]) == (
        "ci", "ci-bot", ["team:infra"], "active")  # fmt: skip
    assert secret not in listed.stdout
    key = resolve_gateway_key(Runtime(second, {"LEDGER_NOW": NOW}), secret)
    assert (key.name, key.agent, key.tags) == ("ci", "ci-bot", ("team:infra",))
    # The store keeps the secret's SHA-256 only, and no home keeps a key file.
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    rows = pg_server.sql(f'SELECT name, sha256 FROM "{schema}".gateway_keys')
    assert rows == [("ci", hashlib.sha256(secret.encode()).hexdigest())]
    dumped = pg_server.sql(f'SELECT row_to_json(k)::text FROM "{schema}".gateway_keys k')
    assert secret not in dumped[0][0]
    assert not (first / "gateway_keys.json").exists()
    assert not (second / "gateway_keys.json").exists()
    # A name is issued once across the fleet.
    again = keys(second, "issue", "ci")
    assert again.code == 2
    assert "already issued" in again.stderr
    revoked = keys(second, "revoke-gateway", "ci")
    assert revoked.code == 0, revoked.stderr
    assert revoked.json()["state"] == "revoked"
    assert keys(first, "list").json()["keys"][0]["state"] == "revoked"
    with pytest.raises(GatewayKeyError, match="revoked"):
        resolve_gateway_key(Runtime(first, {"LEDGER_NOW": NOW}), secret)


def test_hosts_issuing_at_once_all_land(hosts):
    first, second = hosts
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ledger", "--home", str(home), "keys", "issue", f"k{index}"],
            env=clean_env(LEDGER_NOW=NOW),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index, home in enumerate([first, second] * 3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    names = sorted(key["name"] for key in keys(second, "list").json()["keys"])
    assert names == [f"k{index}" for index in range(6)]


def test_another_hosts_gateway_takes_the_key_and_refuses_it_once_revoked(
    hosts, upstream, pg_server, pg_store_env
):
    first, second = hosts
    write_config(second, upstream.url, extra="\n[proxy]\nrequire_keys = true\n")
    with (second / "ledger.toml").open("a") as config:
        config.write(
            f'\n[store]\nurl = "{pg_server.url}"\nschema = "{pg_store_env["LEDGER_STORE_SCHEMA"]}"\n'
        )
    secret = keys(first, "issue", "ci", "--agent", "ci-bot").json()["key"]
    env = clean_env(LEDGER_NOW=NOW, ANTHROPIC_API_KEY="sk-ant-gateway")
    proxy = start_proxy(second, "--listen", "127.0.0.1:0", env=env)
    try:

        def post() -> httpx.Response:
            return httpx.post(
                f"{proxy.url}/v1/messages", content=anthropic_body(),
                headers={"anthropic-version": "2023-06-01", "x-api-key": secret}, timeout=30,
            )  # fmt: skip

        answer = post()
        assert answer.status_code == 200, answer.text
        (sent,) = upstream.requests()
        assert sent["headers"]["x-api-key"] == "sk-ant-gateway"
        assert keys(first, "revoke-gateway", "ci").code == 0
        refused = post()
        assert refused.status_code == 401, refused.text
        assert "revoked" in refused.text
        assert len(upstream.requests()) == 1
    finally:
        assert proxy.stop() == 0, proxy.lines


def test_a_version_2_schema_is_refused_until_init_adds_the_keys_table(
    pg_server, pg_store_env, tmp_path
):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    store_of_release(pg_server.url, schema, 2)  # a fleet made by the previous release
    home = tmp_path / "host"
    home.mkdir()
    (home / "ledger.toml").write_text(
        f'[usd]\ndaily_cap = 50\n[store]\nurl = "{pg_server.url}"\nschema = "{schema}"\n'
    )
    refused = keys(home, "issue", "ci")
    assert refused.code != 0
    assert "schema version 2, older than this ledger needs (5)" in refused.stderr
    assert "run `ledger init` on one host to upgrade it" in refused.stderr
    upgraded = run_process(["--home", str(home), "init"], clean_env(LEDGER_NOW=NOW))
    assert upgraded.code == 0, upgraded.stderr
    assert upgraded.json()["created_schema"] is False
    versions = pg_server.sql(f'SELECT version FROM "{schema}".schema_version ORDER BY version')
    assert versions == [(2,), (5,)]
    issued = keys(home, "issue", "ci")
    assert issued.code == 0, issued.stderr
    assert [key["name"] for key in keys(home, "list").json()["keys"]] == ["ci"]


def test_a_key_row_added_or_changed_by_sql_is_refused_not_used(hosts, pg_server, pg_store_env):
    """Rows carry an HMAC under the fleet secret: SQL without it cannot make a working key."""
    first, second = hosts
    assert keys(first, "issue", "ci", "--agent", "ci-bot").code == 0
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    forged = "lk_forged-by-sql"
    digest = hashlib.sha256(forged.encode()).hexdigest()
    pg_server.sql(
        f'INSERT INTO "{schema}".gateway_keys (name, agent, created, sha256, mac)'
        f" VALUES ('intruder', 'ci-bot', '2026-01-01T00:00:00.000000Z', '{digest}', 'x')"
    )
    listed = keys(second, "list")
    assert listed.code == 65
    assert "'intruder'" in listed.stderr
    assert "integrity" in listed.stderr
    with pytest.raises(Exception, match="integrity"):
        resolve_gateway_key(Runtime(second, {"LEDGER_NOW": NOW}), forged)
    pg_server.sql(f"DELETE FROM \"{schema}\".gateway_keys WHERE name = 'intruder'")
    # Widening a real key by SQL (another agent) is caught the same way.
    pg_server.sql(f"UPDATE \"{schema}\".gateway_keys SET agent = 'root' WHERE name = 'ci'")
    assert keys(first, "list").code == 65
