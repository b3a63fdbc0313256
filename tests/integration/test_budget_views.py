"""Budgets in the views: ``ledger budgets``, ``usage --budget``, ``status``, ``metrics``, ``explain``."""

from tests.integration.test_budgets import Book, with_budgets

SESSIONS = '[[budgets]]\nname = "per-session"\nusd = 5\nperiod = "day"\nper = "session"\n'
MONTHLY = (
    '[[budgets]]\nname = "research"\nusd = 200\nperiod = "month"\n'
    'match = { agent = "research-*" }\n'
)


def spend(home, run_inproc) -> Book:
    with_budgets(home, SESSIONS + MONTHLY)
    book = Book(run_inproc, home)
    ref = book.verdict("2026-11-26T10:00:00Z", "3", "--cycle-id", "s1", "--agent", "research-a")
    book("2026-11-26T10:01:00Z", "record", "4", "--provider", "anthropic",
         "--verdict-ref", ref["verdict_ref"])  # fmt: skip
    book.verdict("2026-11-26T10:02:00Z", "0.5", "--cycle-id", "s2")
    return book


def test_budgets_lists_every_budget_and_value_with_its_period(home, run_inproc):
    """One row per budget and per value, with the current period and the figures."""
    book = spend(home, run_inproc)
    rows = book("2026-11-26T10:03:00Z", "budgets", "--json")["budgets"]
    assert [(r["name"], r["per_value"], r["used"], r["reserved"], r["cap"]) for r in rows] == [
        ("per-session", "s1", 4.0, 0.0, 5.0),
        ("per-session", "s2", 0.0, 0.5, 5.0),
        ("research", None, 4.0, 0.0, 200.0),
    ]
    assert rows[2]["period_start"] == "2026-11-01T00:00:00.000000Z"
    assert rows[0]["usage_pct"] == 80.0
    table = book("2026-11-26T10:03:00Z", "budgets").stdout
    assert "per-session[s1]" in table
    assert "$4.00" in table


def test_usage_budget_shows_one_budget_and_refuses_an_unknown_name(home, run_inproc):
    """``usage --budget NAME``: that budget's rows; an unknown name is a bad command line."""
    book = spend(home, run_inproc)
    rows = book("2026-11-26T10:03:00Z", "usage", "--budget", "research")["budgets"]
    assert [(r["name"], r["used"]) for r in rows] == [("research", 4.0)]
    wrong = book("2026-11-26T10:03:00Z", "usage", "--budget", "nope", code=2)
    assert "no budget named 'nope'" in wrong.stderr


def test_status_and_metrics_show_the_budgets(home, run_inproc):
    """``status`` (JSON and table) and the Prometheus gauges carry every budget."""
    book = spend(home, run_inproc)
    status = book("2026-11-26T10:03:00Z", "status", "--json")
    assert [r["name"] for r in status["budgets"]] == ["per-session", "per-session", "research"]
    assert "research" in book("2026-11-26T10:03:00Z", "status").stdout
    metrics = book("2026-11-26T10:03:00Z", "metrics").stdout
    assert 'ledger_budget_used_usd{budget="per-session",per="s1"} 4.0' in metrics
    assert 'ledger_budget_reserved_usd{budget="per-session",per="s2"} 0.5' in metrics
    assert 'ledger_budget_cap_usd{budget="research",per=""} 200.0' in metrics


def test_explain_reproduces_a_verdict_a_budget_decided(home, run_inproc):
    """``explain`` folds the budgets too: a budget's halt is reproducible and shown."""
    book = spend(home, run_inproc)
    halted = book.verdict("2026-11-26T10:04:00Z", "1", "--cycle-id", "s1")
    assert halted["deciding_cap"] == "budget:per-session[s1]"
    explained = book("2026-11-26T10:05:00Z", "explain", halted["verdict_ref"], "--json")
    assert explained["reproducible"] is True
    assert explained["recomputed"]["deciding_cap"] == "budget:per-session[s1]"
    assert "budget:per-session[s1]" in [cap["scope"] for cap in explained["caps"]]


def test_a_new_period_shows_no_value_of_the_last_one(home, run_inproc):
    """The next day, before any call names a session: one row with no value, not yesterday's."""
    book = spend(home, run_inproc)
    # A call of the new day that names no session (so no per-session counter of this day).
    book.verdict("2026-11-27T09:00:00Z", "0.25", "--agent", "research-a")
    rows = book("2026-11-27T09:01:00Z", "usage", "--budget", "per-session")["budgets"]
    assert [(r["per_value"], r["used"], r["reserved"]) for r in rows] == [(None, 0.0, 0.0)]
    assert rows[0]["period_start"] == "2026-11-27T00:00:00.000000Z"
