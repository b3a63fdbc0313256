"""Messages say the same thing the same way wherever they appear."""

from pathlib import Path
from typing import Any

from tests.integration.test_agent_helpers import cli

NOW = {"LEDGER_NOW": "2026-03-01T12:00:00.000000Z"}


def test_a_missing_billing_reading_is_no_reading_yet(home: Path, run_inproc: Any):
    assert cli(run_inproc, home, "verdict", "80", "--provider", "openai", env=NOW).code == 0
    halted = cli(run_inproc, home, "verdict", "1", "--provider", "openai", env=NOW)
    assert halted.code == 1
    body = halted.json()
    assert body["uncertainty_reason"] == "billing_stale"
    assert "no billing reading yet" in body["diagnostic"], body["diagnostic"]
    assert "never" not in body["diagnostic"]


def test_status_shows_every_row_unknown_while_the_chain_is_torn(home: Path, run_inproc: Any):
    env = {**NOW, "LEDGER_BUDGETS": '[{"name": "burst", "usd": 20, "period": "rolling:5h"}]',
           "LEDGER_USD_PROVIDER_CAPS": '{"openai": 50}'}  # fmt: skip
    ref = cli(run_inproc, home, "verdict", "2", "--provider", "openai", env=env)
    assert ref.code == 0, ref.stderr
    with (home / "events.jsonl").open("ab") as chain:
        chain.write(b'{"schema_version": "1.1.0", "prim')  # a torn last line
    shown = cli(run_inproc, home, "status", env=env)
    assert shown.code == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if line.strip().startswith(
        ("aggregate", "provider:openai", "budget:burst"))]  # fmt: skip
    assert len(rows) == 3, shown.stdout
    for row in rows:
        assert "unknown" in row, shown.stdout
        assert "$0.00" not in row, shown.stdout
        assert "counter_inconsistent" in row, shown.stdout
    document = cli(run_inproc, home, "status", "--json", env=env).json()
    assert document["usd"]["figures_known"] is False
    assert document["usd"]["usd_used"] is None
    assert all(cap["usd_used_micros"] is None for cap in document["usd"]["caps"])
    assert document["budgets"][0]["used"] is None


def test_a_malformed_budget_is_named_as_written(home: Path, run_inproc: Any):
    (home / "ledger.toml").write_text(
        (home / "ledger.toml").read_text()
        + '\n[[budgets]]\nname = "ok"\nusd = 1\nperiod = "day"\n'
        + '\n[[budgets]]\nname = "Research Monthly"\nusd = 200\nperiod = "month"\n'
    )
    refused = cli(run_inproc, home, "status", env=NOW)
    assert refused.code == 78
    assert refused.stderr.startswith('ledger: budgets "Research Monthly".name: must match'), (
        refused.stderr
    )
