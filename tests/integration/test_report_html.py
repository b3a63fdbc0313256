"""ledger report --html: a self-contained page with a matplotlib chart (SPEC §10)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from tests.gate_helpers import Observer
from tests.integration.test_report import DAY, Day

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture
def page(home, run_inproc, tmp_path: Path) -> str:
    """The page for a day with spend on two providers, a halt and a forced reconcile."""
    observer = Observer(tmp_path / "observer", home)
    caps = '{"openai": 40, "anthropic": 25}'
    day = Day(run_inproc, home, observer, LEDGER_USD_PROVIDER_CAPS=caps)
    day("01:00:00", "record", "4.25", "--provider", "openai")
    day("03:00:00", "record", "12", "--provider", "anthropic")
    day("09:30:00", "record", "20.5", "--provider", "openai")
    day("11:00:00", "verdict", "30", "--provider", "openai", code=1)
    observer.answer(40, f"{DAY}T11:59:00Z")
    day("12:00:00", "reconcile", "--force-reason", "invoice")
    day("15:00:00", "record", "6", "--provider", "anthropic")
    out = tmp_path / "report.html"
    result = day("18:00:00", "report", "--by", "model", "--html", str(out))
    assert "Budget day" in result.stdout
    return out.read_text(encoding="utf-8")


def test_page_is_self_contained_with_one_inline_svg(page: str):
    """No network address in any src, href or url(); one inline <svg>; nothing external."""
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)["']""", page, flags=re.IGNORECASE)
    refs += re.findall(r"url\(\s*['\"]?([^)'\"]*)", page, flags=re.IGNORECASE)
    assert refs, "the chart's internal references were expected"
    assert not [ref for ref in refs if re.match(r"(?i)(https?:)?//", ref)]
    assert all(ref.startswith("#") for ref in refs)
    assert page.count("<svg") == 1
    assert "<script" not in page.lower()
    assert "<link" not in page.lower()
    assert "<img" not in page.lower()
    assert "@import" not in page
    assert page.startswith("<!DOCTYPE html>")


def test_page_names_the_caps_and_providers(page: str):
    """The caps and provider names, in the tables and in the chart's legend."""
    svg = page[page.index("<svg") : page.index("</svg>")]
    for label in ("daily cap $100.00", "openai cap $40.00", "anthropic cap $25.00"):
        assert label in svg  # matplotlib keeps each drawn text as a comment
    for text in ("openai", "anthropic", "$100.00", "$40.00", "$25.00", "halt-100", "invoice"):
        assert text in page
    # 4.25 + 12 + 20.5 = 36.75, re-based to the bill's 40.00 at noon, then 6 more
    assert "all providers: $46.00" in svg


def browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def test_screenshot_in_a_headless_browser_is_not_blank(page: str, tmp_path: Path):
    """Chromium renders the page; the PNG has the chart's and the bars' colours, not blank."""
    found = browser()
    if found is None:
        print("SKIP reason: no chromium on PATH (scripts/test.sh installs it when run as root)")
        pytest.skip("chromium not found on PATH (apt-get install chromium)")
    html = tmp_path / "page.html"
    html.write_text(page, encoding="utf-8")
    shot = tmp_path / "page.png"
    subprocess.run(
        [found, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
         "--window-size=1200,1400", html.as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 20_000
    import numpy as np
    from matplotlib.image import imread

    pixels = imread(str(shot))[..., :3]
    assert pixels.shape[0] >= 1000
    assert pixels.shape[1] >= 1000
    ink = (pixels < 0.9).any(axis=2).mean()
    assert ink > 0.02  # text, lines and tables, not a blank page
    red = ((pixels[..., 0] > 0.75) & (pixels[..., 1] < 0.3) & (pixels[..., 2] < 0.3)).sum()
    assert red > 200  # the daily cap's line and the halt marker
    bars = (abs(pixels - np.array([0x4E, 0x79, 0xA7]) / 255) < 0.03).all(axis=2).sum()
    assert bars > 500  # the breakdown's share bar
    colours = len(np.unique((pixels * 15).round().reshape(-1, 3), axis=0))
    assert colours > 20


def test_a_day_active_for_most_of_its_length_shows_all_of_it(page: str):
    """01:00 to now (18:00) pads to most of the day: the axis runs midnight to midnight."""
    from tests.integration.test_report_html_span import hour_ticks, labels

    assert hour_ticks(page) == [f"{h:02d}:00" for h in range(0, 24, 3)] + ["00:00"]
    assert "showing the whole day" in " ".join(labels(page))
    assert "all providers bill: $40.00" in " ".join(labels(page))
