"""`ledger reconcile` (SPEC §5), checked through the verdicts that follow it."""

import json
import stat
from pathlib import Path
from typing import Any

import pytest

NOW = "2026-11-22T12:00:00Z"


@pytest.fixture
def observer(tmp_path: Path):
    """A real observer executable that prints whatever the test puts in a file."""
    reply = tmp_path / "reply.json"
    script = tmp_path / "observer.py"
    script.write_text(
        f"#!/usr/bin/env python3\nimport sys\nsys.stdout.write(open({str(reply)!r}).read())\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)

    def set_reply(**document: object) -> dict[str, str]:
        reply.write_text(json.dumps(document))
        return {"LEDGER_OBSERVER_COMMAND": json.dumps([str(script)]), "LEDGER_NOW": NOW}

    return set_reply


def spend(run, home, usd: str, env) -> None:
    result = run(["--home", str(home), "record", usd, "--provider", "openai"], env)
    assert result.code == 0, result.stderr


def chain_lines(home: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (home / "events.jsonl").read_text().splitlines()]


class TestReconcile:
    def test_within_threshold_is_ok(self, home, run_inproc, observer):
        """Drift at or below 5 % exits 0 and the gate keeps admitting."""
        env = observer(usd_used=10.4, billing_ts="2026-11-22T11:59:00Z")
        spend(run_inproc, home, "10", env)
        result = run_inproc(["--home", str(home), "reconcile"], env)
        assert result.code == 0, result.stderr
        body = result.json()
        assert body["status"] == "ok"
        assert body["drift_pct"] == pytest.approx(3.8462, abs=1e-4)
        assert run_inproc(["--home", str(home), "verdict", "1"], env).code == 0

    def test_drift_blocks_until_a_later_reconcile_is_within_threshold(
        self, home, run_inproc, observer
    ):
        """A blocker (exit 1) makes counter_drift sticky; a good reconcile clears it."""
        env = observer(usd_used=20, billing_ts="2026-11-22T11:59:00Z")
        spend(run_inproc, home, "10", env)
        blocked = run_inproc(["--home", str(home), "reconcile"], env)
        assert blocked.code == 1
        assert blocked.json()["status"] == "blocker"
        verdict = run_inproc(["--home", str(home), "verdict", "1"], env)
        assert verdict.code == 1
        assert verdict.json()["uncertainty_reason"] == "counter_drift"
        env = observer(usd_used=10, billing_ts="2026-11-22T11:59:00Z")
        assert run_inproc(["--home", str(home), "verdict", "1"], env).json()[
            "uncertainty_reason"
        ] == ("counter_drift")
        assert run_inproc(["--home", str(home), "reconcile"], env).code == 0
        assert run_inproc(["--home", str(home), "verdict", "1"], env).code == 0

    def test_provider_drift_halts_that_providers_calls_without_a_sub_cap(
        self, home, run_inproc, observer
    ):
        """A drifting provider halts its own calls even when it has no sub-cap."""
        env = observer(usd_used=20, billing_ts="2026-11-22T11:59:00Z")
        spend(run_inproc, home, "10", env)
        blocked = run_inproc(["--home", str(home), "reconcile", "--provider", "openai"], env)
        assert blocked.code == 1
        verdict = run_inproc(["--home", str(home), "verdict", "1", "--provider", "openai"], env)
        assert verdict.code == 1
        assert verdict.json()["uncertainty_reason"] == "counter_drift"
        assert "provider:openai" in verdict.json()["diagnostic"]
        other = run_inproc(["--home", str(home), "verdict", "1", "--provider", "anthropic"], env)
        assert other.code == 0, other.stdout

    def test_force_reason_rebases_the_counter(self, home, run_inproc, observer):
        """--force-reason records the reason, re-bases to the bill and clears counter_drift."""
        env = observer(usd_used=4, billing_ts="2026-11-22T11:59:00Z")
        spend(run_inproc, home, "10", env)
        assert run_inproc(["--home", str(home), "reconcile"], env).code == 1
        forced = run_inproc(
            ["--home", str(home), "reconcile", "--force-reason", "double-counted retries"], env
        )
        assert forced.code == 0
        assert forced.json()["status"] == "forced"
        entry = chain_lines(home)[-1]
        assert entry["event_type"] == "budget.reconcile"
        assert entry["payload"]["force_reason"] == "double-counted retries"
        usage = run_inproc(["--home", str(home), "usage"], env).json()
        assert usage["usd_used"] == 4
        assert run_inproc(["--home", str(home), "verdict", "1"], env).code == 0

    def test_defer_writes_nothing(self, home, run_inproc, observer):
        """_defer exits 2 and leaves the chain byte for byte as it was."""
        env = observer(_defer=True, _reason="rate_limited")
        spend(run_inproc, home, "1", env)
        before = (home / "events.jsonl").read_bytes()
        result = run_inproc(["--home", str(home), "reconcile"], env)
        assert result.code == 2
        assert (home / "events.jsonl").read_bytes() == before

    def test_unreachable_is_recorded_and_exits_2(self, home, run_inproc, observer):
        """An unreachable observer is recorded with billing_api_unreachable: true."""
        env = observer(_unreachable=True, _reason="dns failure")
        result = run_inproc(["--home", str(home), "reconcile"], env)
        assert result.code == 2
        entry = chain_lines(home)[-1]
        assert entry["event_type"] == "budget.reconcile"
        assert entry["payload"]["billing_api_unreachable"] is True
        assert entry["payload"]["reason"] == "dns failure"

    def test_garbage_output_counts_as_unreachable(self, home, run_inproc, observer):
        """Anything but the three shapes is unreachable, with a reason."""
        env = observer(usd_used=-5, billing_ts="2026-11-22T11:59:00Z")
        result = run_inproc(["--home", str(home), "reconcile"], env)
        assert result.code == 2
        assert result.json()["billing_api_unreachable"] is True

    def test_no_observer_configured_is_unreachable(self, home, run_inproc):
        """Without observer.command there is no bill to reconcile against."""
        result = run_inproc(["--home", str(home), "reconcile"], {"LEDGER_NOW": NOW})
        assert result.code == 2

    def test_reconcile_reading_counts_as_a_billing_reading(self, home, run_inproc, observer):
        """The reading a reconcile takes keeps the gate from halting billing_stale near the cap."""
        env = observer(usd_used=80, billing_ts="2026-11-22T11:59:30Z")
        spend(run_inproc, home, "80", env)
        no_observer = {"LEDGER_NOW": NOW}
        stale = run_inproc(["--home", str(home), "verdict", "1"], no_observer).json()
        assert stale["uncertainty_reason"] == "billing_stale"
        assert run_inproc(["--home", str(home), "reconcile"], env).code == 0
        fresh = run_inproc(["--home", str(home), "verdict", "1"], no_observer)
        assert fresh.code == 0, fresh.stdout
        assert fresh.json()["billing_api_age_seconds"] == 0

    def test_bad_provider_is_a_usage_error(self, home, run_inproc):
        """A malformed provider id exits 2."""
        assert run_inproc(["--home", str(home), "reconcile", "--provider", "Not OK"]).code == 2

    def test_chain_verifies_after_reconciles(self, home, run_inproc, observer):
        """Every reconcile is a sealed envelope in the same chain."""
        env = observer(usd_used=1, billing_ts="2026-11-22T11:59:00Z")
        run_inproc(["--home", str(home), "reconcile"], env)
        run_inproc(["--home", str(home), "reconcile", "--force-reason", "ok"], env)
        result = run_inproc(["--home", str(home), "verify-chain"])
        assert result.code == 0
        assert result.stdout.startswith("OK ")
