"""A gateway killed mid-stream: its call is unsettled, then charged at its estimate.

The admitting verdict marks the reservation as forwarded. A `kill -9` leaves
no record; `ledger status` shows the call as unsettled, and once the
reservation has expired the next verdict seals a record at the estimate,
never a release to $0. A late record of the call's own usage then counts
only what it adds to that charge.
"""

import json
import signal

import httpx
import pytest

from ledger.providers.anthropic import MESSAGE_TOKENS, REQUEST_TOKENS
from tests.conftest import clean_env, run_process
from tests.gateway.helpers import (
    ANTHROPIC_HEADERS,
    NOW,
    anthropic_body,
    chain,
    micros,
    records,
    start_proxy,
    start_upstream,
    write_config,
)

pytestmark = pytest.mark.timeout(180)
# "hi", Anthropic's framing for one request and one message, and max_tokens 1000.
ESTIMATE = micros("anthropic/claude-test", 1 + REQUEST_TOKENS + MESSAGE_TOKENS, 1000)
AFTER_EXPIRY = "2026-06-01T12:16:00Z"  # the default reservation lives 15 minutes


def _ledger(home, *args: str, now: str = NOW):
    return run_process(["--home", str(home), *args], clean_env(LEDGER_NOW=now))


def test_a_call_whose_gateway_was_killed_is_charged_at_its_estimate(home):
    upstream = start_upstream()
    try:
        write_config(home, upstream.url)
        proxy = start_proxy(home, "--listen", "127.0.0.1:0")
        with httpx.Client(timeout=60) as client:
            request = client.build_request(
                "POST", f"{proxy.url}/v1/messages", content=anthropic_body(stream=True),
                headers={**ANTHROPIC_HEADERS, "x-test-scenario": "pause:killed"},
            )  # fmt: skip
            response = client.send(request, stream=True)
            for line in response.iter_lines():
                if "message_start" in line:
                    break
            proxy.proc.send_signal(signal.SIGKILL)
            proxy.proc.wait()
            response.close()
        proxy.stop()
    finally:
        upstream.stop()
    assert records(home) == []

    shown = _ledger(home, "status")
    assert shown.code == 0, shown
    assert "unsettled: 1 forwarded call not recorded yet, $0.02 reserved" in shown.stdout
    document = json.loads(_ledger(home, "status", "--json").stdout)
    assert document["usd"]["unsettled_calls"] == 1

    later = _ledger(home, "verdict", "0.01", now=AFTER_EXPIRY)
    assert later.code == 0, later
    (charge,) = records(home)
    assert charge["actual_micros"] == ESTIMATE
    assert charge["idempotency_key"].startswith("expired:")
    assert charge["settled"] is True
    after = json.loads(_ledger(home, "status", "--json", now=AFTER_EXPIRY).stdout)
    assert after["usd"]["unsettled_calls"] == 0
    assert after["usd"]["caps"][0]["usd_used_micros"] == ESTIMATE
    assert _ledger(home, "verify-chain", now=AFTER_EXPIRY).code == 0

    # The call's own usage arriving late counts only what it adds to the charge.
    ref = charge["verdict_ref"]
    late = _ledger(home, "record", "0.02", "--provider", "anthropic", "--verdict-ref", ref,
                   now=AFTER_EXPIRY)  # fmt: skip
    assert late.code == 0, late
    last = records(home)[-1]
    assert last["charged_at_expiry_micros"] == ESTIMATE
    assert last["actual_micros"] == 20_000 - ESTIMATE
    total = json.loads(_ledger(home, "status", "--json", now=AFTER_EXPIRY).stdout)
    assert total["usd"]["caps"][0]["usd_used_micros"] == 20_000
    assert len([e for e in chain(home) if e["event_type"] == "budget.record_call"]) == 2
