"""`usd_for`: a budget with `per` gives some values their own cap (globs, first match wins)."""

import json

BUDGET = {
    "name": "dev", "usd": 1, "period": "day", "per": "agent",
    "usd_for": {"alice": 5, "ci-*": 20, "ci-special": 2},
}  # fmt: skip
ENV = {
    "LEDGER_NOW": "2026-03-02T10:00:00Z",
    "LEDGER_BILLING_STALE_HALT_PCT": "100",
    "LEDGER_BUDGETS": json.dumps([BUDGET]),
}


def _verdict(run_inproc, home, usd: str, agent: str) -> dict[str, object]:
    result = run_inproc(["--home", str(home), "verdict", usd, "--agent", agent], env=ENV)
    document: dict[str, object] = result.json()
    return document


def test_each_value_gets_its_own_cap_else_the_budgets(home, run_inproc):
    assert _verdict(run_inproc, home, "3", "alice")["verdict"] == "allow"
    bob = _verdict(run_inproc, home, "3", "bob")
    assert (bob["verdict"], bob["deciding_cap"]) == ("halt-100", "budget:dev[bob]")
    # "ci-*" comes first, so it decides for ci-special too.
    assert _verdict(run_inproc, home, "15", "ci-special")["verdict"] == "allow"
    rows = run_inproc(["--home", str(home), "budgets", "--json"], env=ENV)
    assert rows.code == 0, rows.stderr
    caps = {row["per_value"]: row["cap"] for row in rows.json()["budgets"]}
    assert (caps["alice"], caps["ci-special"]) == (5.0, 20.0)


def test_usd_for_needs_per(home, run_inproc):
    budget = {"name": "dev", "usd": 1, "period": "day", "usd_for": {"alice": 5}}
    env = {**ENV, "LEDGER_BUDGETS": json.dumps([budget])}
    result = run_inproc(["--home", str(home), "verdict", "1"], env=env)
    assert result.code == 78
    assert "usd_for: needs per" in result.stderr
