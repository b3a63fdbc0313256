"""The reference pages as a browser lays them out: help blocks fit, config keys break cleanly.

Built with ``mkdocs build --strict`` and measured in a real headless Chromium:
no help block is wider than its column, and a config key or variable in a
table wraps only after a dot or an underscore, never in the middle of a word.
Skipped, with the reason, where no Chromium is installed.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_env
from tests.helpers.browser_env import browser_env

CHROMIUM = next(
    (found for name in ("chromium", "chromium-browser", "google-chrome")
     if (found := shutil.which(name))),
    None,
)  # fmt: skip

# Measures the page and leaves the findings as JSON in a <pre id="layout">.
PROBE = """
<script>
window.addEventListener("load", () => {
  const wide = [...document.querySelectorAll(".md-typeset pre > code")]
    .filter((code) => code.scrollWidth > code.clientWidth + 1)
    .map((code) => code.textContent.slice(0, 60));
  const broken = [];
  for (const code of document.querySelectorAll(".md-typeset table td code")) {
    const text = code.firstChild ? code.textContent : "";
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let last = null, previous = "";
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const top = range.getBoundingClientRect().top;
        if (last !== null && top > last + 2 && !".-_ ".includes(previous) && node.data[i] !== " ") {
          broken.push(text);
        }
        last = top;
        previous = node.data[i];
      }
    }
  }
  const out = document.createElement("pre");
  out.id = "layout";
  out.textContent = JSON.stringify({wide, broken: [...new Set(broken)]});
  document.body.appendChild(out);
});
</script>
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CHROMIUM is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs is not None
    built = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(built)], cwd=REPO,
        env=clean_env(NO_MKDOCS_2_WARNING="1"), capture_output=True, text=True, check=False,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return built


def layout(site: Path, page: str) -> dict[str, list[str]]:
    assert CHROMIUM is not None
    source = site / page / "index.html"
    probed = source.with_name("probed.html")
    probed.write_text(source.read_text().replace("</body>", PROBE + "</body>"))
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,2000",
         "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
        env=browser_env(), capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    found = re.search(r'<pre id="layout">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert found is not None, proc.stderr[-2000:]
    measured: dict[str, list[str]] = json.loads(
        found.group(1).replace("&quot;", '"').replace("&amp;", "&")
    )
    return measured


def test_no_help_block_is_wider_than_its_column(site: Path):
    assert layout(site, "reference/commands")["wide"] == []


def test_config_keys_break_only_after_a_dot_or_an_underscore(site: Path):
    assert layout(site, "reference/config")["broken"] == []
