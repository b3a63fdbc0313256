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
