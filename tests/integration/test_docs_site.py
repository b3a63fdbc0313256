"""The documentation: the site builds strictly, and nothing in it points outside the repository.

A reader has the repository and nothing else, so every page (and the README)
must stand on its own; the generated reference must cover every config key.
"""

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_env

DOCS = REPO / "docs"
# What a reader of the repository cannot follow: files beside it, planning notes.
OUTSIDE = re.compile(
    r"\.\./shared|SPEC\.md|\bSPEC\s*§|\bseeds?\b|\bissues?\s*#?\d+|(?<![\w&])#\d{1,5}\b",
    re.IGNORECASE,
)


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


@pytest.mark.parametrize("path", documents(), ids=lambda path: str(path.relative_to(REPO)))
def test_no_page_refers_outside_the_repository(path: Path):
    """No ../shared, SPEC.md or SPEC §, no seeds, no issue numbers: readers have only the repo."""
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if OUTSIDE.search(line)
    ]
    assert found == []


def test_the_outside_pattern_catches_what_it_is_for():
    """The check itself: each kind of outside reference is caught, ordinary text is not."""
    for bad in (
        "see ../shared/SPEC.md",
        "as SPEC §4 says",
        "seed 000",
        "Issue 3 asks",
        "fixes #12",
    ):
        assert OUTSIDE.search(bad), bad
    for fine in ("RFC 9162 §2.1.3", "a $100 cap", "verdict 9c1f4be07a3d52e8", "`#!python` line"):
        assert not OUTSIDE.search(fine), fine


def test_every_config_key_has_a_meaning_in_the_reference():
    """The config reference is generated from the code; a key added there needs its meaning."""
    spec = importlib.util.spec_from_file_location(
        "docs_reference", REPO / "scripts" / "docs_reference.py"
    )
    assert spec is not None
    assert spec.loader is not None
    docs_reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs_reference)
    missing = [name for name, _, _, meaning in docs_reference.config_rows() if not meaning]
    assert missing == []


def test_the_site_builds_strictly(tmp_path: Path):
    """mkdocs build --strict: every nav page exists, every link resolves, the hook runs."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs is not None, "mkdocs-material is part of the test extra"
    site = tmp_path / "site"
    proc = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        env=clean_env(NO_MKDOCS_2_WARNING="1"),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    commands = (site / "reference" / "commands" / "index.html").read_text()
    for command in ("ledger verdict", "ledger status", "ledger deploy systemd", "ledger explain"):
        assert command in commands
    config = (site / "reference" / "config" / "index.html").read_text()
    assert "observer.env" in config.replace("<wbr>", "")  # keys may break after a dot


def test_the_readme_keeps_the_two_setup_commands_and_stays_short():
    """A stranger's first two commands, exactly; the rest lives in the docs site."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert "bash scripts/install-and-run.sh" in text
    assert "bash scripts/test.sh" in text
    assert len(text.splitlines()) <= 260


def test_every_gateway_key_is_in_the_reference_and_the_new_config():
    """Each [proxy] key: its row on the gateway page, named in the reference, shown by init."""
    from ledger.core.config_template import config_template
    from ledger.core.proxy_config import _KEYS

    gateway = (DOCS / "integrations" / "gateway.md").read_text(encoding="utf-8")
    reference = (DOCS / "reference" / "config.md").read_text(encoding="utf-8")
    template = config_template("20")
    for key in _KEYS:
        row = "providers.<name>" if key == "providers" else key
        assert f"| `{row}" in gateway, key
        assert f"`{row}" in reference, key
        assert re.search(rf"^# (\[proxy\.)?{key}\b", template, re.MULTILINE), key


def test_every_prices_show_example_finds_its_price(tmp_path: Path):
    """`ledger prices show …` as the pages write it prints the rates (exit 0), not "no price"."""
    shown = {
        " ".join(found.split())
        for path in documents()
        for found in re.findall(r"`(ledger prices show [^`]*)`", path.read_text(encoding="utf-8"))
        if "MODEL" not in found
    }
    assert shown, "the pages show prices show examples"
    env = clean_env(HOME=str(tmp_path), LEDGER_HOME=str(tmp_path / "home"))
    ledger = [sys.executable, "-m", "ledger"]
    subprocess.run([*ledger, "init", "--billing", "none"], env=env, check=True, capture_output=True)
    for example in sorted(shown):
        proc = subprocess.run(
            [*ledger, *example.split()[1:]], env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, (example, proc.stderr)
