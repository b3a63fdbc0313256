"""The README's Claude Code and Python quick starts, run as pasted.

Each block is cut from README.md as a reader would copy it; only the
environment around it is the test's (a throw-away HOME, a local server that
answers like the Anthropic API in place of the real one).
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_env
from tests.fakes.provider import FakeProvider

README = (REPO / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent


def section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    return [part.split("```", 1)[0] for part in text.split(f"```{language}\n")[1:]]


def test_claude_code_quick_start_routes_through_the_gateway_with_fail_closed_hooks(
    tmp_path: Path,
):
    [commands] = blocks(section("Quick start: Claude Code"), "sh")
    env = clean_env(HOME=str(tmp_path), PATH=f"{BIN}:/usr/bin:/bin")
    for pasted in commands.splitlines():
        line = pasted.split("#", 1)[0].strip()
        if line:
            proc = subprocess.run(
                ["/bin/sh", "-c", line], env=env, capture_output=True, text=True, check=False
            )
            assert proc.returncode == 0, (line, proc.stderr)
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert set(settings["hooks"]) == {
        "PreToolUse", "PostToolUse", "Stop", "UserPromptSubmit", "SessionEnd"
    }  # fmt: skip
    assert settings["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8787"
    home = str(tmp_path / ".ledger")
    for groups in settings["hooks"].values():
        for group in groups:
            for hook in group["hooks"]:
                launcher = hook["command"].split()[0]
                assert Path(launcher).is_absolute(), hook["command"]
                assert f"--home {home}" in hook["command"]


@pytest.fixture
def server():
    running = FakeProvider(detailed_usage=True)
    yield running
    running.close()


def test_python_quick_start_runs_and_guards_the_client(tmp_path: Path, server: FakeProvider):
    api, client = blocks(section("Quick start: Python"), "python")
    home = tmp_path / "home"
    env = clean_env(
        LEDGER_HOME=str(home),
        LEDGER_NO_SERVER="1",
        LEDGER_BILLING_STALE_HALT_PCT="100",
        ANTHROPIC_BASE_URL=server.url,
        ANTHROPIC_API_KEY="test",
    )
    init = [sys.executable, "-m", "ledger", "init", "--daily-cap-usd", "20"]
    assert subprocess.run(init, env=env, capture_output=True, check=False).returncode == 0
    for code in (api, client):
        proc = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert proc.returncode == 0, (code, proc.stderr)
    assert [path for path, _ in server.model_requests()] == ["/v1/messages"]
    lines = [json.loads(line) for line in (home / "events.jsonl").read_text().splitlines()]
    kinds = [entry["event_type"] for entry in lines]
    # The API block: a verdict and its record, a guarded verdict and its record;
    # the client block: the SDK call's verdict and its record.
    assert kinds.count("budget.record_call") == 3
    assert kinds.count("budget.allow") == 3


GETTING_STARTED = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
KEY_RE = re.compile(r"""--idempotency-key\s+([A-Za-z0-9._:-]+)|idempotency_key="([^"]+)\"""")
PLACEHOLDER_REFS = ("9c1f4be07a3d52e8…", "<verdict_ref>")


def page_section(page: str, title: str) -> str:
    return page.split(f"{title}\n", 1)[1].split("\n## ", 1)[0]


def commands(block: str) -> list[str]:
    """A shell block's command lines, continuations joined, comments dropped."""
    joined = block.replace("\\\n", " ")
    lines = [line.split(" # ", 1)[0].strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_the_pages_share_no_idempotency_key():
    """A reader pasting README and getting-started examples into one home never reuses a key."""
    found = [a or b for text in (README, GETTING_STARTED) for a, b in KEY_RE.findall(text)]
    assert found, "the pages show idempotency keys"
    assert len(found) == len(set(found)), found


def test_readme_and_getting_started_examples_run_in_one_home(tmp_path: Path):
    """Make a home, gate calls from both pages and the Python quick start: all recorded once."""
    env = clean_env(
        HOME=str(tmp_path), PATH=f"{BIN}:/usr/bin:/bin", LEDGER_NOW="2026-03-02T12:00:00Z"
    )
    [make_home] = blocks(page_section(GETTING_STARTED, "## Make a home"), "sh")
    [gate, by_tokens] = blocks(page_section(GETTING_STARTED, "## Gate a call"), "sh")
    [readme_cli] = blocks(section("From the command line"), "sh")
    ref = ""
    records = 0
    for pasted in commands(make_home) + commands(gate) + commands(by_tokens) + commands(readme_cli):
        if pasted.startswith("export "):
            name, _, value = pasted.removeprefix("export ").partition("=")
            env[name] = value.replace("~", str(tmp_path))
            continue
        line = pasted
        for placeholder in PLACEHOLDER_REFS:
            line = line.replace(placeholder, ref)
        proc = subprocess.run(
            ["/bin/sh", "-c", line], env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, (line, proc.stderr)
        document = json.loads(proc.stdout) if proc.stdout.startswith("{") else {}
        if " verdict " in f" {line} ":
            assert document["verdict"] == "allow", document
            ref = document["verdict_ref"]
        if " record " in f" {line} ":
            assert document["duplicate"] is False, line
            records += 1
    api = blocks(section("Quick start: Python"), "python")[0]
    proc = subprocess.run(
        [sys.executable, "-c", api],
        env={**env, "LEDGER_NO_SERVER": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    home = Path(env["LEDGER_HOME"])
    entries = [json.loads(line) for line in (home / "events.jsonl").read_text().splitlines()]
    sealed = [e for e in entries if e["event_type"] == "budget.record_call"]
    assert len(sealed) == records + 2  # the Python block records twice
