# ruff: noqa: S608 - schema names are the tests' own identifiers
"""Gateway keys issued and revoked are sealed in the chain: who could spend, as whom, until when.

``gateway.key_issued`` / ``gateway.key_revoked`` carry the name, a prefix of the
secret's SHA-256, the agent, the tags and the expiry, never the secret; on the
file store and on a fleet's PostgreSQL store.
"""

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.gate_helpers import env_at
from tests.integration.test_agent_helpers import cli
from tests.pg import STORES


def _entries(home: Path, request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    if "\n[store]\n" in (home / "ledger.toml").read_text():
        server = request.getfixturevalue("pg_server")
        schema = request.getfixturevalue("pg_store_env")["LEDGER_STORE_SCHEMA"]
        rows = server.sql(f'SELECT line FROM "{schema}".chain ORDER BY seq')
        return [json.loads(bytes(line)) for (line,) in rows]
    return [json.loads(line) for line in (home / "events.jsonl").read_text().splitlines()]


@STORES
def test_issue_and_revoke_seal_the_key_but_never_its_secret(
    home: Path, run_inproc: Any, request: pytest.FixtureRequest
):
    issued = cli(run_inproc, home, "keys", "issue", "ci", "--agent", "ci-bot", "--tag",
                 "team:infra", "--expires", "2099-01-01T00:00:00Z", env=env_at())  # fmt: skip
    assert issued.code == 0, issued.stderr
    secret = issued.json()["key"]
    prefix = hashlib.sha256(secret.encode()).hexdigest()[:16]
    revoked = cli(run_inproc, home, "keys", "revoke-gateway", "ci", env=env_at())
    assert revoked.code == 0, revoked.stderr

    entries = _entries(home, request)
    sealed = [e for e in entries if e["event_type"].startswith("gateway.")]
    assert [e["event_type"] for e in sealed] == ["gateway.key_issued", "gateway.key_revoked"]
    for entry in sealed:
        assert entry["payload"] == {
            "name": "ci", "sha256_prefix": prefix, "agent": "ci-bot", "tags": ["team:infra"],
            "expires": "2099-01-01T00:00:00.000000Z",
        }  # fmt: skip
    everything = json.dumps(entries)
    assert secret not in everything
    assert hashlib.sha256(secret.encode()).hexdigest() not in everything
    assert cli(run_inproc, home, "verify-chain", env=env_at()).code == 0
    # The gate folds the new entries without halting.
    assert cli(run_inproc, home, "verdict", "1", env=env_at()).json()["verdict"] == "allow"


@STORES
def test_a_refused_issue_or_revoke_seals_nothing(
    home: Path, run_inproc: Any, request: pytest.FixtureRequest
):
    assert cli(run_inproc, home, "keys", "issue", "ci", env=env_at()).code == 0
    assert cli(run_inproc, home, "keys", "issue", "ci", env=env_at()).code == 2
    assert cli(run_inproc, home, "keys", "revoke-gateway", "nope", env=env_at()).code == 2
    sealed = [e for e in _entries(home, request) if e["event_type"].startswith("gateway.")]
    assert [e["event_type"] for e in sealed] == ["gateway.key_issued"]
