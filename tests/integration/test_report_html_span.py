"""ledger report --html: the chart spans the active period; readings and the breakdown drawn."""

import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from tests.gate_helpers import Observer
from tests.integration.test_report import DAY, Day
from tests.integration.test_report_breakdown import real


def labels(page: str) -> list[str]:
    """The texts drawn in the chart (matplotlib keeps each one as a comment)."""
    svg = page[page.index("<svg") : page.index("</svg>")]
    return [text.strip() for text in re.findall(r"<!-- (.*?) -->", svg, flags=re.DOTALL)]


def hour_ticks(page: str) -> list[str]:
    return [text for text in labels(page) if re.fullmatch(r"\d\d:\d\d", text)]


def test_an_hour_long_day_is_drawn_over_its_hour(home, tmp_path: Path):
    observer = Observer(tmp_path / "observer", home)
    day = Day(real, home, observer)
    day("10:00:00", "record", "1.5", "--provider", "openai", "--model-id", "gpt-x")
    observer.answer(1.5, f"{DAY}T10:19:00Z")
    day("10:20:00", "poll", "--provider", "openai")
    day("10:55:00", "record", "3", "--provider", "anthropic", "--model-id", "claude-a")
    out = tmp_path / "hour.html"
    day("11:30:00", "report", "--day", DAY, "--by", "model", "--html", str(out), day="2026-03-03")
    page = out.read_text(encoding="utf-8")
    ticks = hour_ticks(page)
    assert ticks[0] in {"09:45", "09:50"}
    assert "10:30" in ticks
    assert ticks[-1] in {"11:00", "11:10"}
    assert "03:00" not in ticks
    drawn = " ".join(labels(page))
    assert "showing 1 h" in drawn  # 09:45 to 11:10
    assert "openai bill: $1.50" in drawn
    assert "<h2>Bill readings</h2>" in page
    assert "<h2>Spend by model (recorded calls)</h2>" in page
    assert "<td>claude-a</td>" in page
    assert '<div style="width: 66.7%">' in page


def test_today_runs_on_to_now(home, tmp_path: Path):
    day = Day(real, home, Observer(tmp_path / "observer", home))
    day("10:00:00", "record", "1.5", "--provider", "openai")
    out = tmp_path / "today.html"
    day("14:00:00", "report", "--html", str(out))
    ticks = hour_ticks(tmp_path.joinpath("today.html").read_text(encoding="utf-8"))
    assert ticks[0] == "10:00"
    assert ticks[-1] == "14:00"
    assert len(ticks) <= 10


def test_a_day_without_entries_shows_the_whole_day(home, tmp_path: Path):
    out = tmp_path / "empty.html"
    day = Day(real, home, Observer(tmp_path / "observer", home))
    day("12:00:00", "report", "--day", "2026-02-20", "--html", str(out))
    page = out.read_text(encoding="utf-8")
    assert hour_ticks(page) == [f"{h:02d}:00" for h in range(0, 24, 3)] + ["00:00"]
    assert "showing the whole day of a 24 h budget day" in " ".join(labels(page))
