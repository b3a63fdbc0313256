"""A chain changed behind the gate's back halts naming ``ledger recover``, never ``rebuild-state``.

The derived state was saved at a head the chain no longer has (its last entry
edited or cut); every path that shows the halt (verdict, hook) names the same
way out, and ``recover`` gets out of it.
"""

from pathlib import Path
from typing import Any

import pytest

from tests.gate_helpers import env_at
from tests.integration.test_agent_helpers import cli
from tests.integration.test_hooks import pre


def _spend(run_inproc: Any, home: Path) -> None:
    for _ in range(2):
        ref = cli(run_inproc, home, "verdict", "1", "--provider", "openai", env=env_at())
        assert ref.code == 0, ref.stderr
        assert cli(run_inproc, home, "record", "1", "--provider", "openai", "--verdict-ref", ref.json()["verdict_ref"],
                   env=env_at()).code == 0  # fmt: skip


@pytest.mark.parametrize("tamper", ["edit", "cut"])
def test_a_changed_chain_halts_naming_recover_and_recover_lifts_it(
    home: Path, run_inproc: Any, tamper: str
):
    _spend(run_inproc, home)
    chain = home / "events.jsonl"
    lines = chain.read_text().splitlines(keepends=True)
    if tamper == "edit":
        lines[-1] = lines[-1].replace('"actual_micros":1000000', '"actual_micros":1000001')
    else:
        lines = lines[:-1]
    chain.write_text("".join(lines))

    halted = cli(run_inproc, home, "verdict", "0.5", env=env_at())
    assert halted.code == 1
    body = halted.json()
    assert body["uncertainty_reason"] == "counter_inconsistent"
    assert "run `ledger recover`" in body["diagnostic"], body["diagnostic"]
    assert "rebuild-state" not in body["diagnostic"]
    stopped = pre(run_inproc, home, env_at()).json()
    assert stopped["continue"] is False
    assert "`ledger recover`" in stopped["stopReason"]
    assert "rebuild-state" not in stopped["stopReason"]

    recovered = cli(run_inproc, home, "recover", env=env_at())
    assert recovered.code == 0, recovered.stderr
    assert cli(run_inproc, home, "verdict", "0.5", env=env_at()).json()["verdict"] == "allow"
