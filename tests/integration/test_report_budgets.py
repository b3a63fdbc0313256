"""ledger report covers the ``[[budgets]]`` that applied to the day's calls (SPEC §10, §12)."""

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import clean_env, run_process
from tests.integration.test_budgets import Book, with_budgets

BUDGETS = """
[[budgets]]
name = "per-session"
usd = 5
period = "day"
per = "session"

[[budgets]]
name = "research"
usd = 200
period = "month"
match = { agent = "research-*" }

[[budgets]]
name = "burst"
usd = 50
period = "rolling:1d"
match = { provider = "anthropic" }

[[budgets]]
name = "never-used"
usd = 1
period = "week"
match = { agent = "nobody" }
"""
DAY = "2026-11-26"


def real(args: list[str], env: dict[str, str] | None = None) -> Any:
    return run_process(args, env=clean_env(**(env or {})))


def spend(home: Path, *, next_day: bool = True) -> Book:
    """Three days of calls by real ledger processes.

    The day before: 4.00 by research-a (session s0). The day: session s1 of
    research-a spends 4.00 (a 3.00 verdict it settles), session s2 only
    reserves 0.50, and a 1.00 verdict for s1 halts on its $5 session budget.
    The day after: another 4.00 by research-a, outside the reported day.
    """
    with_budgets(home, BUDGETS)
    book = Book(real, home)
    ref = book.verdict("2026-11-25T20:00:00Z", "4", "--cycle-id", "s0", "--agent", "research-a")
    book("2026-11-25T20:01:00Z", "record", "4", "--provider", "anthropic",
         "--verdict-ref", ref["verdict_ref"])  # fmt: skip
    ref = book.verdict(f"{DAY}T10:00:00Z", "3", "--cycle-id", "s1", "--agent", "research-a")
    book(f"{DAY}T10:01:00Z", "record", "4", "--provider", "anthropic",
         "--verdict-ref", ref["verdict_ref"])  # fmt: skip
    assert book.verdict(f"{DAY}T10:02:00Z", "0.5", "--cycle-id", "s2")["verdict"] == "allow"
    halted = book.verdict(f"{DAY}T10:03:00Z", "1", "--cycle-id", "s1", "--agent", "research-a")
    assert halted["deciding_cap"] == "budget:per-session[s1]"
    assert halted["verdict"] == "halt-100"
    if not next_day:
        return book
    ref = book.verdict("2026-11-27T09:00:00Z", "4", "--cycle-id", "s3", "--agent", "research-a")
    assert ref["verdict"] == "allow"
    book("2026-11-27T09:01:00Z", "record", "4", "--provider", "anthropic",
         "--verdict-ref", ref["verdict_ref"])  # fmt: skip
    return book


@pytest.fixture
def book(home) -> Book:
    return spend(home)


def figures(document: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (b["name"], b["per_value"], b["used_micros"], b["reserved_micros"], b["cap_micros"],
         b["usage_pct"], b["halts"])
        for b in document["budgets"]
    ]  # fmt: skip


def test_a_past_day_shows_each_budget_over_its_period_to_the_days_end(book):
    """Per-session rows, the month to the day's end, the rolling day, the budget's halt."""
    doc = book("2026-11-27T12:00:00Z", "report", "--day", DAY, "--json")
    assert figures(doc) == [
        ("per-session", "s1", 4_000_000, 0, 5_000_000, "80.0000", 1),
        ("per-session", "s2", 0, 0, 5_000_000, "0.0000", 0),
        ("research", None, 8_000_000, 0, 200_000_000, "4.0000", 0),
        ("burst", None, 4_000_000, 0, 50_000_000, "8.0000", 0),
    ]
    windows = {(b["name"], b["per_value"]): (b["period_start"], b["period_end"])
               for b in doc["budgets"]}  # fmt: skip
    assert windows["per-session", "s1"] == (
        f"{DAY}T00:00:00.000000Z",
        "2026-11-27T00:00:00.000000Z",
    )
    assert windows["research", None] == (
        "2026-11-01T00:00:00.000000Z",
        "2026-12-01T00:00:00.000000Z",
    )
    assert windows["burst", None] == (f"{DAY}T00:00:00.000000Z", "2026-11-27T00:00:00.000000Z")
    assert doc["budgets"][2]["period"] == "month"
    assert doc["budgets"][0]["per"] == "session"
    assert [h["deciding_cap"] for h in doc["halts"]] == ["budget:per-session[s1]"]


def test_today_reads_the_budgets_now(home):
    """A day not yet over: open reservations count, and the rolling window ends now."""
    doc = spend(home, next_day=False)(f"{DAY}T10:05:00Z", "report", "--json")
    rows = {(b["name"], b["per_value"]): b for b in doc["budgets"]}
    assert rows["per-session", "s2"]["reserved_micros"] == 500_000
    assert rows["research", None]["used_micros"] == 8_000_000
    assert rows["burst", None]["period_end"] == f"{DAY}T10:05:00.000000Z"
    assert rows["burst", None]["used_micros"] == 8_000_000  # the 4.00 at 20:01 is in the window


def test_the_table_and_the_page_show_the_budgets(book, tmp_path: Path):
    """A table section for people and an HTML table on the page."""
    pytest.importorskip("matplotlib")
    page = tmp_path / "day.html"
    text = book("2026-11-27T12:00:00Z", "report", "--day", DAY, "--html", str(page)).stdout
    section = text[text.index("Budgets (their periods to the day's end):") :]
    lines = section.splitlines()
    assert lines[1].split() == ["BUDGET", "PERIOD", "FROM", "TO", "USED", "RESERVED", "CAP",
                                "USAGE", "HALTS"]  # fmt: skip
    assert lines[2].split() == ["per-session[s1]", "day", "2026-11-26T00:00Z", "2026-11-27T00:00Z",
                                "$4.00", "$0.00", "$5.00", "80.0%", "1"]  # fmt: skip
    assert lines[4].split()[:2] == ["research", "month"]
    html = page.read_text()
    assert "<h2>Budgets</h2>" in html
    assert "<td>per-session[s1]</td>" in html
    assert "never-used" not in html


def test_the_chart_draws_the_budgets_and_their_halts_on_their_lines(book):
    """Each shown budget has its spend through the day; its halt sits on its line."""
    pytest.importorskip("matplotlib")
    from ledger.integrations.report_chart import halt_points

    doc = book("2026-11-27T12:00:00Z", "report", "--day", DAY, "--json")
    session = next(b for b in doc["budgets"] if b["per_value"] == "s1")
    assert session["scope"] == "budget:per-session[s1]"
    assert session["series"][0] == [f"{DAY}T00:00:00.000000Z", 0]
    assert session["series"][-1][1] == 4_000_000
    (halt,) = [p for p in halt_points(doc) if p[1].startswith("budget:")]
    assert halt[1:] == ("budget:per-session[s1]", 4_000_000)


def test_a_home_without_budgets_reports_none(home):
    """``budgets: []`` in JSON and no budgets section in the table."""
    book = Book(real, home)
    book(f"{DAY}T10:00:00Z", "record", "1", "--provider", "anthropic")
    assert book(f"{DAY}T11:00:00Z", "report", "--json")["budgets"] == []
    assert "Budgets" not in book(f"{DAY}T11:00:00Z", "report").stdout
