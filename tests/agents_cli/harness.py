"""One real agent CLI, a real `ledger proxy` and the fake provider in agent mode, on a $1 cap.

The provider's truth is the fake's own log of what it answered, priced here
with genai-prices directly (not through ledger), so a test compares what the
provider would bill with what the chain holds.
"""

import subprocess
import sys
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

from genai_prices import Usage, calc_price

from tests.conftest import clean_env
from tests.gateway.helpers import NOW, Proxy, Upstream, chain, records

CAP_MICROS = 1_000_000
_PROVIDERS = {"/v1/messages": "anthropic", "/v1/responses": "openai"}


def write_home_config(home: Path, upstream: Upstream, extra: str = "") -> None:
    """A $1 daily cap, the fake as every upstream, prices from genai-prices.

    No billing observer runs here, so the rule that halts above 75 % of a cap
    without a fresh bill is set aside (``stale_halt_pct = 100``): only the cap
    decides, as with a home whose spend goes through the gateway alone.
    """
    (home / "ledger.toml").write_text(
        "[usd]\ndaily_cap = 1\n\n[billing]\nstale_halt_pct = 100\n\n"
        f'[proxy.upstream]\nanthropic = "{upstream.url}"\nopenai = "{upstream.url}"\n'
        f'google = "{upstream.url}"\n{extra}'
    )


def ledger(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), *args],
        env=env or clean_env(LEDGER_NOW=NOW), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def provider_of(path: str) -> str:
    return _PROVIDERS.get(path, "google")


def price_micros(call: dict[str, Any]) -> int:
    """What the provider bills for one logged call, in micro-USD, by genai-prices."""
    usage = call["usage"]
    provider = provider_of(call["path"])
    if provider == "anthropic":
        tokens = Usage(input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"])
    elif provider == "openai":
        tokens = Usage(input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"])
    else:
        tokens = Usage(
            input_tokens=usage["promptTokenCount"], output_tokens=usage["candidatesTokenCount"]
        )
    price = calc_price(tokens, model_ref=call["model"], provider_id=provider).total_price
    # The exact sum over token kinds, rounded up once to whole micro-USD.
    return int((Decimal(price) * 1_000_000).to_integral_value(rounding=ROUND_CEILING))


@dataclass
class Outcome:
    """The figures of one run: what the provider billed against what the chain holds."""

    calls: int
    records: int
    truth_micros: int
    recorded_micros: int
    halts: int

    @property
    def percent(self) -> float:
        return self.truth_micros * 100 / CAP_MICROS


def account(home: Path, upstream: Upstream) -> Outcome:
    """Check every upstream call is in the chain once at its exact price; return the figures.

    Records that no upstream call answered (none is expected) fail the check.
    """
    calls = upstream.calls()
    found = records(home)
    by_key: dict[str, list[dict[str, Any]]] = {}
    for record in found:
        by_key.setdefault(record["idempotency_key"], []).append(record)
    for call in calls:
        key = f"{provider_of(call['path'])}:{call['id']}"
        assert len(by_key.get(key, [])) == 1, f"{key} recorded {len(by_key.get(key, []))} times"
        assert by_key[key][0]["actual_micros"] == price_micros(call), (call, by_key[key][0])
    expected = {f"{provider_of(c['path'])}:{c['id']}" for c in calls}
    # A stopped session's open verdicts are settled by $0 records of no call.
    strays = [r for r in found if r["idempotency_key"] not in expected and r["actual_micros"]]
    assert not strays, f"records of no upstream call: {strays}"
    halts = sum(1 for e in chain(home) if e["event_type"] == "budget.halt_100")
    return Outcome(
        calls=len(calls),
        records=sum(1 for r in found if r["idempotency_key"] in expected),
        truth_micros=sum(price_micros(c) for c in calls),
        recorded_micros=sum(int(r["actual_micros"]) for r in found),
        halts=halts,
    )


def report(name: str, outcome: Outcome, proxy: Proxy) -> None:
    """One line of figures in the test output (``-s``), for the measurements."""
    sys.stderr.write(
        f"\n[figures] {name}: {outcome.percent:.1f} % of the $1 cap spent by the provider's log, "
        f"{outcome.calls} upstream calls, {outcome.records} records, "
        f"{outcome.halts} requests refused (402), proxy log lines {len(proxy.lines)}\n"
    )
