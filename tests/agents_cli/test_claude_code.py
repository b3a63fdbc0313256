"""The real Claude Code CLI on a $1 cap: every call gated, recorded once, the session stopped."""

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agents_cli import clis
from tests.agents_cli.conftest import need
from tests.agents_cli.harness import (
    CAP_MICROS,
    account,
    ledger,
    price_micros,
    report,
)
from tests.gateway.helpers import NOW, Proxy, Upstream

pytestmark = pytest.mark.timeout(300)
MODEL = "claude-sonnet-4-5"
PROMPT = "Check the workspace with the shell, again and again."
RELEASES = [f"{clis.CLAUDE_CODE}@{version}" for version in clis.CLAUDE_CODE_RELEASES]


def claude_env(cli_home: Path, gateway_url: str | None, **extra: str) -> dict[str, str]:
    env = clis.sealed_env(
        cli_home,
        ANTHROPIC_API_KEY="sk-ant-fake",
        DISABLE_TELEMETRY="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        # As root, Claude Code takes --dangerously-skip-permissions only in a sandbox.
        IS_SANDBOX="1",
        # For the hooks: they run this ledger on the same budget day as the gateway.
        PYTHONPATH=os.environ.get("PYTHONPATH", ""),
        LEDGER_NOW=NOW,
        **extra,
    )
    if gateway_url is not None:
        env["ANTHROPIC_BASE_URL"] = gateway_url
    return env


def claude(
    spec: str, cli_home: Path, env: dict[str, str], *more: str
) -> tuple[clis.Run, dict[str, Any]]:
    """``claude -p PROMPT --output-format json``; the run and its JSON result."""
    done = clis.run(
        need(spec),
        ["-p", PROMPT, "--output-format", "json", "--model", MODEL,
         "--dangerously-skip-permissions", *more],
        env, cwd=cli_home / "work",
    )  # fmt: skip
    try:
        result = json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"no JSON result: {done}") from None
    return done, result


def assert_used_most_of_the_cap(truth_micros: int) -> None:
    # Claude Code asks 32,000 output tokens a call; the gateway's clamp lowers the
    # limit of the last calls to what fits, so the session uses most of the cap.
    assert truth_micros >= CAP_MICROS * 0.9


@pytest.mark.parametrize("spec", RELEASES)
def test_through_the_gateway_the_session_stops_at_the_cap_with_every_call_once(
    spec: str, cap_home: Path, gateway: Proxy, upstream: Upstream, cli_home: Path
) -> None:
    done, result = claude(spec, cli_home, claude_env(cli_home, gateway.url))

    assert done.code != 0
    assert result["is_error"] is True
    assert "402" in result["result"], result["result"]
    assert "halt-100" in result["result"], result["result"]
    outcome = account(cap_home, upstream)
    report(f"Claude Code {spec.rsplit('@', 1)[1]} gateway only", outcome, gateway)
    assert outcome.calls == outcome.records > 1
    assert outcome.truth_micros <= CAP_MICROS
    assert outcome.halts >= 1
    assert ledger(cap_home, "verify-chain").returncode == 0
    assert_used_most_of_the_cap(outcome.truth_micros)


def install_hooks(home: Path, cli_home: Path, *more: str) -> dict[str, Any]:
    settings = cli_home / ".claude" / "settings.json"
    done = ledger(home, "hook", "install", "--settings", str(settings), *more)
    assert done.returncode == 0, done.stderr
    written: dict[str, Any] = json.loads(done.stdout)
    return written


def reserved_micros(home: Path) -> int:
    """What the day's aggregate cap still holds reserved."""
    done = ledger(home, "status", "--json")
    reserved: int = json.loads(done.stdout)["usd"]["caps"][0]["usd_reserved_micros"]
    return reserved


@pytest.mark.parametrize("spec", RELEASES)
def test_hook_install_with_the_gateway_is_hard_and_counts_each_response_once(
    spec: str, cap_home: Path, gateway: Proxy, upstream: Upstream, cli_home: Path
) -> None:
    written = install_hooks(cap_home, cli_home, "--gateway", gateway.url)
    assert written["gateway"] == gateway.url

    # No ANTHROPIC_BASE_URL of its own: the settings file routes it.
    _done, result = claude(spec, cli_home, claude_env(cli_home, None))

    assert result["is_error"] is True, result
    assert "halt-100" in result["result"], result["result"]
    outcome = account(cap_home, upstream)
    report(f"Claude Code {spec.rsplit('@', 1)[1]} hook install + gateway", outcome, gateway)
    assert outcome.calls == outcome.records > 1
    assert outcome.truth_micros <= CAP_MICROS
    # The hooks reserved nothing beside the gateway, and nothing stays reserved.
    assert reserved_micros(cap_home) == 0
    assert ledger(cap_home, "verify-chain").returncode == 0
    assert_used_most_of_the_cap(outcome.truth_micros)


@pytest.mark.parametrize("spec", RELEASES)
def test_hooks_alone_stop_the_session_within_one_call_of_the_cap(
    spec: str, cap_home: Path, upstream: Upstream, cli_home: Path
) -> None:
    install_hooks(cap_home, cli_home)

    _done, result = claude(spec, cli_home, claude_env(cli_home, upstream.url))

    # A hook stopped it (a release that ignored the stop would loop to the timeout).
    assert result["terminal_reason"] == "hook_stopped", result
    outcome = account(cap_home, upstream)
    largest = max(price_micros(call) for call in upstream.calls())
    sys.stderr.write(
        f"\n[figures] Claude Code {spec.rsplit('@', 1)[1]} hooks only: {outcome.percent:.1f} % "
        f"of the $1 cap, {outcome.calls} upstream calls, {outcome.records} records\n"
    )
    # Every response, the last before the stop included, is recorded once.
    assert outcome.calls == outcome.records > 1
    # A soft cap: at most one call past it.
    assert outcome.truth_micros <= CAP_MICROS + largest
    assert reserved_micros(cap_home) == 0
    assert ledger(cap_home, "verify-chain").returncode == 0


@pytest.mark.parametrize("spec", RELEASES[:1])
def test_continue_after_the_halt_spends_nothing_more(
    spec: str, cap_home: Path, gateway: Proxy, upstream: Upstream, cli_home: Path
) -> None:
    install_hooks(cap_home, cli_home, "--gateway", gateway.url)
    claude(spec, cli_home, claude_env(cli_home, None))
    before = len(upstream.calls())

    _done, result = claude(spec, cli_home, claude_env(cli_home, None), "--continue")

    assert len(upstream.calls()) == before
    assert result["is_error"] is True or "halt-100" in json.dumps(result), result
    outcome = account(cap_home, upstream)
    assert outcome.truth_micros <= CAP_MICROS
    assert ledger(cap_home, "verify-chain").returncode == 0


def test_a_hook_stop_shows_its_reason_in_the_stream_json_output(
    cap_home: Path, upstream: Upstream, cli_home: Path
) -> None:
    install_hooks(cap_home, cli_home)

    done = clis.run(
        need(RELEASES[0]),
        ["-p", PROMPT, "--output-format", "stream-json", "--verbose", "--model", MODEL,
         "--dangerously-skip-permissions"],
        claude_env(cli_home, upstream.url), cwd=cli_home / "work",
    )  # fmt: skip

    messages = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    shown = [m.get("content", "") for m in messages if m.get("type") == "system"]
    assert any("halt-100" in str(text) for text in shown), shown
    assert messages[-1]["terminal_reason"] == "hook_stopped"
