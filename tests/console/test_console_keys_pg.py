"""Console keys on a fleet's store (PostgreSQL): issued, listed with their role, signed in with."""

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from ledger.console.app import build_app
from ledger.console.auth import Auth
from ledger.runtime import Runtime

NOW = "2026-06-01T12:00:00Z"


@pytest.mark.parametrize("home", ["postgres"], indirect=True)
def test_a_console_key_kept_in_the_fleets_store_signs_in(
    home: Path, pg_store_env: dict[str, str], run_inproc
) -> None:
    env = {**pg_store_env, "LEDGER_NOW": NOW}
    issued = run_inproc(["--home", str(home), "keys", "issue", "ops", "--role", "viewer"], env)
    assert issued.code == 0, issued.stderr
    secret = issued.json()["key"]
    gateway = run_inproc(["--home", str(home), "keys", "issue", "ci"], env)
    assert gateway.code == 0, gateway.stderr
    listed = run_inproc(["--home", str(home), "keys", "list"], env).json()["keys"]
    assert {key["name"]: key["role"] for key in listed} == {"ops": "viewer", "ci": "gateway"}

    app = build_app(lambda: Runtime(home, env), Auth(12), secure_cookies=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        bearer = {"authorization": f"Bearer {secret}"}
        assert client.get("/console/api/overview", headers=bearer).status_code == 200
        refused = client.post("/console/api/keys", headers=bearer, json={"name": "x"})
        assert refused.status_code == 403  # a viewer changes nothing
        signed = client.post("/console/login", data={"key": secret}, follow_redirects=False)
        assert signed.status_code == 303, signed.text
        assert client.get("/console/api/keys").json()["keys"]
    revoked = run_inproc(["--home", str(home), "keys", "revoke-gateway", "ops"], env)
    assert revoked.code == 0, revoked.stderr
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/console/api/overview", headers=bearer).status_code == 401
