"""``ledger keys issue | list | revoke-gateway`` and resolving a presented key."""

import json
import stat

import pytest

from ledger.errors import GatewayKeyError
from ledger.runtime import Runtime
from ledger.services.gateway_keys import resolve_gateway_key


def test_issue_prints_the_secret_once_and_keeps_only_its_hash(home, run_inproc):
    """The secret is printed by issue, absent from the file (0600) and from list."""
    issued = run_inproc(["--home", str(home), "keys", "issue", "ci", "--agent", "ci-bot",
                         "--tag", "team:infra", "--expires", "2099-01-01T00:00:00Z"])  # fmt: skip
    assert issued.code == 0, issued.stderr
    document = issued.json()
    secret = document["key"]
    assert secret.startswith("lk_")
    assert (document["name"], document["agent"], document["tags"]) == ("ci", "ci-bot",
                                                                      ["team:infra"])  # fmt: skip
    path = home / "gateway_keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert secret not in path.read_text()
    listed = run_inproc(["--home", str(home), "keys", "list"])
    assert secret not in listed.stdout
    assert json.loads(listed.stdout)["keys"][0]["state"] == "active"
    key = resolve_gateway_key(Runtime(home, {}), secret)
    assert (key.name, key.agent, key.tags) == ("ci", "ci-bot", ("team:infra",))


def test_a_revoked_key_is_refused(home, run_inproc):
    """After revoke-gateway the key no longer resolves; listing shows it revoked."""
    secret = run_inproc(["--home", str(home), "keys", "issue", "ci"]).json()["key"]
    revoked = run_inproc(["--home", str(home), "keys", "revoke-gateway", "ci"])
    assert revoked.json()["state"] == "revoked"
    with pytest.raises(GatewayKeyError, match="revoked"):
        resolve_gateway_key(Runtime(home, {}), secret)
    again = run_inproc(["--home", str(home), "keys", "revoke-gateway", "nope"])
    assert again.code == 2
    assert again.stderr.startswith("ledger: no gateway key named 'nope'")


def test_an_expired_key_is_refused_and_bad_expiries_too(home, run_inproc):
    """A key is refused from its expiry on; --expires must parse and lie ahead."""
    made = run_inproc(
        ["--home", str(home), "keys", "issue", "short", "--expires", "2026-11-26T11:00:00Z"],
        env={"LEDGER_NOW": "2026-11-26T10:00:00Z"},
    )
    secret = made.json()["key"]  # fmt: skip
    assert resolve_gateway_key(Runtime(home, {"LEDGER_NOW": "2026-11-26T10:59:59Z"}), secret)
    with pytest.raises(GatewayKeyError, match="expired"):
        resolve_gateway_key(Runtime(home, {"LEDGER_NOW": "2026-11-26T11:00:00Z"}), secret)
    bad = run_inproc(["--home", str(home), "keys", "issue", "x", "--expires", "tomorrow"])
    assert bad.code == 2
