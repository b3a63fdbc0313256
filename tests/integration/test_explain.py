"""ledger explain VERDICT_REF: recompute a sealed verdict from the chain alone (SPEC §10)."""

import json
from pathlib import Path
from typing import Any

NOW = {"LEDGER_NOW": "2026-03-02T10:00:00Z"}


def verdict(run_inproc, home: Path, usd: str, provider: str = "openai") -> dict[str, Any]:
    result = run_inproc(["--home", str(home), "verdict", usd, "--provider", provider], env=NOW)
    assert result.code in (0, 1), result.stderr
    document: dict[str, Any] = result.json()
    return document


def explain(run_inproc, home: Path, ref: str, env: dict[str, str] | None = None):
    return run_inproc(["--home", str(home), "explain", ref, "--json"], env=env or NOW)


def test_each_outcome_is_reproduced_with_every_row(home, run_inproc):
    """allow, warn-90, billing_stale and halt-100 verdicts are each recomputed as sealed."""
    cases = [("10", "allow", None), ("60", "allow", None), ("21", "warn-90", None),
             ("1", "halt-uncertainty", "billing_stale")]  # fmt: skip
    for usd, outcome, reason in cases:
        sealed = verdict(run_inproc, home, usd)
        assert sealed["verdict"] == outcome
        result = explain(run_inproc, home, sealed["verdict_ref"])
        assert result.code == 0, result.stderr
        doc = result.json()
        assert doc["reproducible"] is True
        assert doc["recomputed"]["verdict"] == outcome
        assert doc["recomputed"]["uncertainty_reason"] == reason
        assert [row["order"] for row in doc["rows"]] == list(range(1, 9))
        first = next(row for row in doc["rows"] if row["matched"])
        assert first["outcome"] == outcome
        assert first["order"] == doc["recomputed"]["deciding_row"]
        assert doc["caps"][0]["scope"] == "aggregate"
        assert doc["caps"][0]["estimate_micros"] == int(usd) * 1_000_000


def test_figures_are_those_the_verdict_saw(home, run_inproc):
    """used, reserved and projected % are the state before the verdict, not after."""
    verdict(run_inproc, home, "30")
    sealed = verdict(run_inproc, home, "20")
    doc = explain(run_inproc, home, sealed["verdict_ref"]).json()
    cap = doc["caps"][0]
    assert cap["reserved_micros"] == 30_000_000
    assert cap["used_micros"] == 0
    assert cap["projected_pct"] == "50.0000"
    assert doc["billing_readings"] == [{"scope": "aggregate", "reading": None}]


def test_halt_100_with_a_provider_cap(home, run_inproc):
    """A provider sub-cap that decides is shown beside the aggregate cap."""
    env = {**NOW, "LEDGER_USD_PROVIDER_CAPS": '{"openai": 5}'}
    result = run_inproc(["--home", str(home), "verdict", "6", "--provider", "openai"], env=env)
    ref = result.json()["verdict_ref"]
    assert result.json()["verdict"] == "halt-100"
    doc = explain(run_inproc, home, ref, env).json()
    assert [c["scope"] for c in doc["caps"]] == ["aggregate", "provider:openai"]
    assert doc["recomputed"]["deciding_cap"] == "provider:openai"
    assert doc["reproducible"] is True


def test_changed_config_makes_it_not_reproducible(home, run_inproc):
    """A verdict the current config would decide differently is reported, exit 1."""
    sealed = verdict(run_inproc, home, "50")
    result = explain(run_inproc, home, sealed["verdict_ref"], {**NOW, "LEDGER_USD_DAILY_CAP": "10"})
    assert result.code == 1
    doc = result.json()
    assert doc["reproducible"] is False
    assert any(d.startswith("verdict:") for d in doc["differences"])
    assert "not reproducible" in result.stderr


def test_table_for_people(home, run_inproc):
    """Without --json: the caps, the rows and the readings as text."""
    sealed = verdict(run_inproc, home, "10")
    result = run_inproc(["--home", str(home), "explain", sealed["verdict_ref"]], env=NOW)
    assert result.code == 0
    assert "verdict table rows, in order:" in result.stdout
    assert "* 8 allow: matched" in result.stdout


def test_unknown_malformed_and_non_verdict_refs(home, run_inproc):
    """Unknown ref: exit 1 and one ledger: line; malformed: exit 2; a record is not a verdict."""
    verdict(run_inproc, home, "1")
    unknown = explain(run_inproc, home, "ab" * 32)
    assert unknown.code == 1
    assert unknown.stdout == ""
    assert unknown.stderr.count("\n") == 1
    assert unknown.stderr.startswith("ledger: ")
    assert explain(run_inproc, home, "not-a-ref").code == 2
    record = run_inproc(["--home", str(home), "record", "0.5", "--provider", "openai"], env=NOW)
    assert record.code == 0, record.stderr
    lines = (home / "events.jsonl").read_bytes().splitlines()
    from ledger.core.envelope import parse_line

    record_ref = parse_line(lines[-1]).entry_hash
    not_verdict = explain(run_inproc, home, record_ref)
    assert not_verdict.code == 1
    assert "not a verdict" in not_verdict.stderr
    assert json.loads(lines[-1])["event_type"] == "budget.record_call"


def test_a_unique_prefix_of_twelve_digits_or_more_is_explained(home, run_inproc):
    """The short refs messages print (16 digits) and any unique 12-digit prefix explain it."""
    verdict(run_inproc, home, "1")
    sealed = verdict(run_inproc, home, "2")
    ref = sealed["verdict_ref"]
    for prefix in (ref[:12], ref[:16], ref):
        result = explain(run_inproc, home, prefix)
        assert result.code == 0, result.stderr
        assert result.json()["verdict_ref"] == ref
    too_short = explain(run_inproc, home, ref[:11])
    assert too_short.code == 2
    assert too_short.stderr.count("\n") == 1
    unknown = explain(run_inproc, home, "0" * 12 if not ref.startswith("0" * 12) else "f" * 12)
    assert unknown.code == 1


def test_an_ambiguous_prefix_is_a_bad_command_line_naming_it(home, run_inproc, monkeypatch):
    """Two entries under one prefix: exit 2 naming the prefix and both lines, nothing printed.

    Two real entries sharing 12 hex digits cannot be made on purpose, so the
    index here answers the first two entries' hashes for the prefix.
    """
    import ledger.services.views.explain as service
    from ledger.services.chain.refs import FoundEntry

    def shared_prefix(_deps, prefix, limit=2):
        return [FoundEntry(prefix + "0" * 52, 1), FoundEntry(prefix + "1" * 52, 2)][:limit]

    verdict(run_inproc, home, "1")
    verdict(run_inproc, home, "2")
    monkeypatch.setattr(service, "find_entries", shared_prefix)
    result = explain(run_inproc, home, "abcdef012345")
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "ledger: VERDICT_REF: abcdef012345 matches more than one entry (lines 1, 2): "
        "give more digits\n"
    )


def test_the_warn_row_names_the_threshold_that_matched(home, run_inproc):
    """A budget with its own warn_pct = 80 warns at 80 %, and row 7 says so, by its threshold."""
    budgets = [{"name": "team", "usd": 10, "period": "day", "warn_pct": 80}]
    env = {**NOW, "LEDGER_BUDGETS": json.dumps(budgets), "LEDGER_BILLING_STALE_HALT_PCT": "100"}
    result = run_inproc(["--home", str(home), "verdict", "8.5", "--provider", "openai"], env=env)
    assert result.json()["verdict"] == "warn-90", result.stdout

    doc = explain(run_inproc, home, result.json()["verdict_ref"], env).json()

    (row,) = [row for row in doc["rows"] if row["order"] == 7]
    assert row["matched"] is True
    assert row["detail"] == "projected ≥ 80 % under warn_pct = 80: budget:team"
