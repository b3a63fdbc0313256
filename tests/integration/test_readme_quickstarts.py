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

import httpx
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
PLACEHOLDER_REFS = ("9c1f4be07a3d52e8…", "5e07a1d93c2b48f6…", "<verdict_ref>")


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
    usage = subprocess.run(
        [sys.executable, "-m", "ledger", "usage"], env=env, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert json.loads(usage.stdout)["usd_reserved"] == 0.0  # every verdict shown is settled


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_the_claude_code_halt_messages_are_what_the_gateway_and_the_hooks_print(tmp_path: Path):
    """The README's two messages: the gateway's 402 near the cap, the hooks' once it is spent."""
    from tests.gateway.helpers import start_proxy, start_upstream

    shown = [_one_line(block) for block in blocks(section("Quick start: Claude Code"), "text")]
    refused, blocked = shown
    home = tmp_path / ".ledger"
    upstream = start_upstream()
    try:
        env = clean_env(
            HOME=str(tmp_path),
            LEDGER_NOW="2026-11-22T15:00:00Z",
            LEDGER_NO_SERVER="1",
            LEDGER_PROXY_UPSTREAM=json.dumps({"anthropic": upstream.url}),
        )
        ledger = [sys.executable, "-m", "ledger", "--home", str(home)]

        def run(*args: str, stdin: str = "", **extra: str) -> str:
            proc = subprocess.run(
                [*ledger, *args], input=stdin, env={**env, **extra},
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            assert proc.returncode == 0, (args, proc.stderr)
            return proc.stdout

        run("init", "--daily-cap-usd", "2", "--billing", "none")
        run("record", "1.995", "--provider", "anthropic", "--idempotency-key", "spent-1")
        proxy = start_proxy(home, "--listen", "127.0.0.1:0", env=env)
        try:
            body = {"model": "claude-sonnet-4-6", "max_tokens": 32000,
                    "messages": [{"role": "user", "content": "Hello"}]}  # fmt: skip
            answer = httpx.post(
                f"{proxy.url}/v1/messages", json=body, timeout=60,
                headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
            )  # fmt: skip
            assert answer.status_code == 402, answer.text
            message = answer.json()["error"]["message"]
        finally:
            assert proxy.stop() == 0, proxy.lines
        assert upstream.requests() == []
        verdict = re.compile(r"\(verdict [0-9a-f]{12}\)")
        assert verdict.sub("(verdict …)", f"API Error: 402 {message}") == verdict.sub(
            "(verdict …)", refused
        )
        run("record", "0.005", "--provider", "anthropic", "--idempotency-key", "spent-2")
        hook = {"session_id": "s1", "transcript_path": str(tmp_path / "none.jsonl"),
                "hook_event_name": "UserPromptSubmit", "prompt": "hi", "cwd": str(tmp_path)}  # fmt: skip
        answered = run(
            "hook", "user-prompt-submit", stdin=json.dumps(hook),
            LEDGER_GATEWAY_URL="http://127.0.0.1:8787",
        )  # fmt: skip
        assert json.loads(answered) == {"decision": "block", "reason": blocked}
    finally:
        upstream.stop()


def test_the_keep_it_running_units_are_written_for_the_quick_start_home(tmp_path: Path):
    """The README's deploy command works on the home the quick starts make, without root."""
    [block] = blocks(section("Keep it running"), "sh")
    env = clean_env(HOME=str(tmp_path), PATH=f"{BIN}:/usr/bin:/bin")
    [make_home] = blocks(section("Quick start: any agent, behind the gateway"), "sh")
    for line in [make_home.splitlines()[0], *commands(block)]:
        if line.startswith("systemctl "):
            continue  # the machine's systemd is not the test's to change
        proc = subprocess.run(
            ["/bin/sh", "-c", line], env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, (line, proc.stderr)
    units = tmp_path / ".config" / "systemd" / "user"
    assert (units / "ledger-daemon.service").is_file()
    assert f"--home {tmp_path / '.ledger'}" in (units / "ledger-daemon.service").read_text()


PYTHON_PAGE = (REPO / "docs" / "integrations" / "python.md").read_text(encoding="utf-8")


def test_the_python_pages_halt_message_is_what_the_guard_raises(
    tmp_path: Path, server: FakeProvider
):
    """The Python page's printed BudgetHalted: the same words and figures, in the same state."""
    shown_block = PYTHON_PAGE.split("except ledger.BudgetHalted as halted:", 1)[1]
    comment = shown_block.split("print(halted)\n", 1)[1].split("print(halted.verdict", 1)[0]
    shown = " ".join(line.strip().removeprefix("# ") for line in comment.splitlines()).strip()
    env = clean_env(
        LEDGER_HOME=str(tmp_path / "home"),
        LEDGER_NO_SERVER="1",
        LEDGER_NOW="2026-03-02T12:00:00Z",
        ANTHROPIC_BASE_URL=server.url,
        ANTHROPIC_API_KEY="test",
    )
    ledger = [sys.executable, "-m", "ledger"]
    for args in (
        ["init", "--daily-cap-usd", "20", "--billing", "none"],
        ["record", "19.95", "--provider", "anthropic", "--idempotency-key", "earlier"],
        ["verdict", "0.04", "--provider", "anthropic"],
    ):
        subprocess.run([*ledger, *args], env=env, check=True, capture_output=True)
    code = (
        "import anthropic, ledger\n"
        "from ledger.integrations.anthropic import guard_client\n"
        "client = guard_client(anthropic.Anthropic(), ledger.open())\n"
        "msgs = [{'role': 'user', 'content': 'Hello'}]\n"
        "try:\n"
        "    client.messages.create(model='claude-sonnet-4-6', max_tokens=1024, messages=msgs)\n"
        "except ledger.BudgetHalted as halted:\n"
        "    print(halted)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == shown
    assert server.model_requests() == []


GATEWAY_PAGE = (REPO / "docs" / "integrations" / "gateway.md").read_text(encoding="utf-8")


def test_the_gateway_pages_curl_example_is_gated_and_shows_the_verdict_headers(tmp_path: Path):
    """The curl call of the gateway page, pasted into a shell, against a gateway made as shown."""
    from tests.gateway.helpers import start_proxy, start_upstream

    curl = blocks(page_section(GATEWAY_PAGE, "### curl"), "sh")[0]
    start = blocks(page_section(GATEWAY_PAGE, "## Start it"), "sh")[0]
    upstream = start_upstream()
    try:
        env = clean_env(
            HOME=str(tmp_path),
            PATH=f"{BIN}:/usr/bin:/bin",
            ANTHROPIC_API_KEY="sk-ant-test",
            LEDGER_HOME=str(tmp_path / ".ledger"),
            LEDGER_PROXY_UPSTREAM=json.dumps({"anthropic": upstream.url}),
        )
        [init, proxy_line] = commands(start)
        assert proxy_line == "ledger proxy"
        subprocess.run(["/bin/sh", "-c", init], env=env, check=True, capture_output=True)
        proxy = start_proxy(tmp_path / ".ledger", "--listen", "127.0.0.1:0", env=env)
        try:
            pasted = curl.replace("\\\n", " ").replace("http://127.0.0.1:8787", proxy.url)
            proc = subprocess.run(
                ["/bin/sh", "-c", pasted], env=env, capture_output=True, text=True, check=False
            )
        finally:
            assert proxy.stop() == 0, proxy.lines
        assert proc.returncode == 0, proc.stderr
        assert "HTTP/1.1 200" in proc.stdout
        for header in (
            "x-ledger-verdict: allow",
            "x-ledger-verdict-ref:",
            "x-ledger-usd-remaining:",
        ):
            assert header in proc.stdout.lower(), proc.stdout
        [sent] = [r for r in upstream.requests() if r["path"] == "/v1/messages"]
        assert "x-ledger-agent" not in {name.lower() for name in sent["headers"]}
    finally:
        upstream.stop()
