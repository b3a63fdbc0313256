"""Gateway keys at the gateway: a real `ledger proxy` scopes requests by the key they present."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import clean_env, run_process
from tests.gateway.helpers import (
    NOW,
    Proxy,
    Upstream,
    anthropic_body,
    records,
    start_proxy,
    verdicts,
    write_config,
)

pytestmark = pytest.mark.timeout(120)
KEYED = (
    "\n[proxy]\nrequire_keys = true\n\n"
    '[[budgets]]\nname = "ci-key"\nusd = 0.02\nperiod = "day"\nmatch = { key = "ci" }\n'
)


@pytest.fixture
def keyed(home: Path, upstream: Upstream) -> Iterator[tuple[Proxy, str]]:
    write_config(home, upstream.url, extra=KEYED)
    issued = run_process(["--home", str(home), "keys", "issue", "ci", "--agent", "ci-bot",
                          "--tag", "team"], clean_env(LEDGER_NOW=NOW))  # fmt: skip
    assert issued.code == 0, issued.stderr
    env = clean_env(LEDGER_NOW=NOW, ANTHROPIC_API_KEY="sk-ant-gateway")
    running = start_proxy(home, "--listen", "127.0.0.1:0", env=env)
    yield running, issued.json()["key"]
    assert running.stop() == 0, running.lines


def _post(proxy: Proxy, **headers: str) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/messages", content=anthropic_body(),
                      headers={"anthropic-version": "2023-06-01", **headers})  # fmt: skip


def test_a_key_scopes_the_call_and_the_gateway_substitutes_its_provider_key(keyed, upstream, home):
    """The agent and tags are the key's; upstream sees the gateway's key, never lk_..."""
    proxy, secret = keyed
    answer = _post(proxy, authorization=f"Bearer {secret}", **{"x-ledger-session": "s1"})
    assert answer.status_code == 200, answer.text
    (sent,) = upstream.requests()
    assert sent["headers"]["x-api-key"] == "sk-ant-gateway"
    assert "authorization" not in sent["headers"]
    payload = verdicts(home)[-1]["payload"]
    assert (payload["agent"], payload["tags"], payload["key"], payload["cycle_id"]) == (
        "ci-bot", ["team"], "ci", "s1")  # fmt: skip
    assert [b["name"] for b in payload["budgets"]] == ["ci-key"]
    (record,) = records(home)
    assert (record["agent"], record["tags"], record["key"]) == ("ci-bot", ["team"], "ci")


def test_the_keys_budget_halts_with_402(keyed, upstream):
    """The key's budget is checked: once spent, the next call is 402 and never sent."""
    proxy, secret = keyed
    assert _post(proxy, **{"x-api-key": secret}).status_code == 200
    halted = _post(proxy, **{"x-api-key": secret})
    assert halted.status_code == 402
    assert halted.headers["x-ledger-verdict"] == "halt-100"
    assert "budget:ci-key" in halted.text
    assert len(upstream.requests()) == 1


def test_missing_unknown_and_revoked_keys_get_401(keyed, upstream, home):
    """With proxy.require_keys, no key, a wrong key and a revoked key are all 401."""
    proxy, secret = keyed
    assert _post(proxy, **{"x-api-key": "sk-ant-own"}).status_code == 401
    assert _post(proxy, **{"x-api-key": "lk_" + "x" * 43}).status_code == 401
    revoked = run_process(["--home", str(home), "keys", "revoke-gateway", "ci"],
                          clean_env(LEDGER_NOW=NOW))  # fmt: skip
    assert revoked.code == 0, revoked.stderr
    refused = _post(proxy, **{"x-api-key": secret})
    assert refused.status_code == 401
    assert "revoked" in refused.text
    assert secret not in refused.text
    assert upstream.requests() == []


def test_a_key_cannot_claim_another_agent_or_tag(keyed, upstream):
    """x-ledger-agent or x-ledger-tags the key does not carry are refused (403)."""
    proxy, secret = keyed
    assert _post(proxy, **{"x-api-key": secret, "x-ledger-agent": "other"}).status_code == 403
    assert _post(proxy, **{"x-api-key": secret, "x-ledger-tags": "admin"}).status_code == 403
    assert _post(proxy, **{"x-api-key": secret, "x-ledger-agent": "ci-bot"}).status_code == 200
    assert len(upstream.requests()) == 1


PER_AGENT = (
    "\n[proxy]\nrequire_keys = true\n\n"
    '[[budgets]]\nname = "per-agent"\nusd = 0.05\nperiod = "day"\nper = "agent"\n'
)


def test_a_key_issued_without_an_agent_is_bound_to_its_name(home, upstream):
    """No --agent: the key's name is its agent, so its holder cannot spread spend over
    agents it names itself; each claim of another agent is 403 in the provider's shape,
    and the per-agent budget halts the key at its cap."""
    write_config(home, upstream.url, extra=PER_AGENT)
    issued = run_process(["--home", str(home), "keys", "issue", "loose"], clean_env(LEDGER_NOW=NOW))
    assert issued.code == 0, issued.stderr
    assert issued.json()["agent"] == "loose"
    secret = issued.json()["key"]
    env = clean_env(LEDGER_NOW=NOW, ANTHROPIC_API_KEY="sk-ant-gateway")
    proxy = start_proxy(home, "--listen", "127.0.0.1:0", env=env)
    try:
        claims = [
            _post(proxy, **{"x-api-key": secret, "x-ledger-agent": f"a{n}"}) for n in range(3)
        ]
        spent = [_post(proxy, **{"x-api-key": secret}) for _ in range(8)]
    finally:
        assert proxy.stop() == 0, proxy.lines
    for refused in claims:
        assert refused.status_code == 403
        assert refused.json()["type"] == "error"
        assert "is for agent 'loose'" in refused.json()["error"]["message"]
    statuses = [answer.status_code for answer in spent]
    assert 402 in statuses
    assert "budget:per-agent[loose]" in spent[statuses.index(402)].text
    total = sum(record["actual_micros"] for record in records(home))
    assert total <= 50_000
    assert {record["agent"] for record in records(home)} == {"loose"}
