"""ledger metrics: the Prometheus text format, written atomically (SPEC §10)."""

from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

NOW = {"LEDGER_NOW": "2026-03-02T10:00:00Z"}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_figures_per_scope_verdicts_entries_and_snapshot_age(home, run_inproc):
    """used/reserved/cap/usage per scope, today's verdicts by outcome and reason, entries, age."""
    env = {**NOW, "LEDGER_USD_PROVIDER_CAPS": '{"openai": 50}'}
    h = ["--home", str(home)]
    assert run_inproc([*h, "verdict", "10", "--provider", "openai"], env=env).code == 0
    assert run_inproc([*h, "record", "4", "--provider", "openai"], env=env).code == 0
    assert run_inproc([*h, "verdict", "80", "--provider", "anthropic"], env=env).code == 0
    assert run_inproc([*h, "verdict", "1", "--provider", "anthropic"], env=env).code == 1
    assert run_inproc([*h, "snapshot"], env=env).code == 0
    later = {**env, "LEDGER_NOW": "2026-03-02T10:05:00Z"}
    result = run_inproc([*h, "metrics"], env=later)
    assert result.code == 0, result.stderr
    got = samples(result.stdout)
    assert got["ledger_cap_usd", (("scope", "aggregate"),)] == 100.0
    assert got["ledger_cap_usd", (("scope", "provider:openai"),)] == 50.0
    assert got["ledger_used_usd", (("scope", "provider:openai"),)] == 4.0
    assert got["ledger_reserved_usd", (("scope", "aggregate"),)] == 90.0
    assert got["ledger_usage_pct", (("scope", "aggregate"),)] == 94.0
    assert got["ledger_verdicts_today", (("outcome", "warn-90"), ("reason", ""))] == 1.0
    assert got["ledger_verdicts_today", (("outcome", "allow"), ("reason", ""))] == 1.0
    assert (
        got["ledger_verdicts_today", (("outcome", "halt-uncertainty"), ("reason", "billing_stale"))]
        == 1.0
    )
    assert got["ledger_chain_entries", ()] == 5.0  # 3 verdicts, a record, a snapshot
    assert got["ledger_snapshot_age_seconds", ()] == 300.0
    assert got["ledger_counter_trusted", ()] == 1.0


def test_output_file_is_written_atomically_and_nothing_is_sealed(home, run_inproc, tmp_path: Path):
    """--output replaces the file whole (no temporary left beside it); the chain is untouched."""
    out = tmp_path / "ledger.prom"
    out.write_text("old\n")
    before = (home / "events.jsonl").read_bytes() if (home / "events.jsonl").exists() else b""
    result = run_inproc(["--home", str(home), "metrics", "--output", str(out)], env=NOW)
    assert result.code == 0, result.stderr
    assert result.stdout == ""
    assert "ledger_chain_entries 0.0" in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "ledger.prom"]
    after = (home / "events.jsonl").read_bytes() if (home / "events.jsonl").exists() else b""
    assert before == after


def test_unwritable_output_is_one_error_line(home, run_inproc, tmp_path: Path):
    """A folder that does not exist: exit 74 with one ledger: line."""
    result = run_inproc(
        ["--home", str(home), "metrics", "--output", str(tmp_path / "no" / "x.prom")], env=NOW
    )
    assert result.code == 74
    assert result.stderr.startswith("ledger: ")
    assert result.stderr.count("\n") == 1


def test_billing_reading_age_per_scope(home, run_inproc, tmp_path: Path):
    """The age of the newest bill reading, which operators alert on; absent before any reading."""
    import json
    import sys

    bill = tmp_path / "bill.json"
    bill.write_text(json.dumps({"usd_used": 1, "billing_ts": "2026-03-02T10:00:00Z"}))
    observer = [
        sys.executable,
        str(Path(__file__).resolve().parents[2] / "observers" / "file_observer.py"),
        "--file",
        str(bill),
    ]
    env = {**NOW, "LEDGER_OBSERVER_COMMAND": json.dumps(observer)}
    h = ["--home", str(home)]
    before = samples(run_inproc([*h, "metrics"], env=env).stdout)
    assert not any(name == "ledger_billing_reading_age_seconds" for name, _ in before)
    assert run_inproc([*h, "poll"], env=env).code == 0
    later = {**env, "LEDGER_NOW": "2026-03-02T10:07:30Z"}
    got = samples(run_inproc([*h, "metrics"], env=later).stdout)
    assert got["ledger_billing_reading_age_seconds", (("scope", "aggregate"),)] == 450.0


def test_money_is_unknown_not_zero_while_the_chain_is_torn(home, run_inproc):
    """A torn chain: used, reserved and usage are NaN (unknown), the cap stays, trusted 0."""
    import math

    h = ["--home", str(home)]
    env = {**NOW, "LEDGER_BUDGETS": '[{"name": "team", "usd": 4, "period": "day"}]'}
    assert run_inproc([*h, "record", "3", "--provider", "openai"], env=env).code == 0
    chain = home / "events.jsonl"
    chain.write_bytes(chain.read_bytes()[:-7])
    result = run_inproc([*h, "metrics"], env=env)
    assert result.code == 0, result.stderr
    got = samples(result.stdout)
    assert got["ledger_counter_trusted", ()] == 0.0
    for name in ("ledger_used_usd", "ledger_reserved_usd", "ledger_usage_pct"):
        assert math.isnan(got[name, (("scope", "aggregate"),)]), name
    assert got["ledger_cap_usd", (("scope", "aggregate"),)] == 100.0
    budget = (("budget", "team"), ("per", ""))
    assert math.isnan(got["ledger_budget_used_usd", budget])
