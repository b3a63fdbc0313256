"""Helpers shared by the agent-budget integration tests (no tests here; named for the test layout)."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def cli(run_inproc, home: Path, *args: str, env: dict[str, str] | None = None, stdin: str = ""):
    return run_inproc(["--home", str(home), *args], env=env, stdin=stdin)


def event_types(home: Path) -> list[str]:
    path = home / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["event_type"] for line in path.read_text().splitlines()]


def payloads(home: Path, event_type: str) -> list[dict[str, Any]]:
    path = home / "events.jsonl"
    return [
        entry["payload"]
        for entry in map(json.loads, path.read_text().splitlines())
        if entry["event_type"] == event_type
    ]


def assert_chain_verifies(run_inproc, home: Path) -> int:
    result = cli(run_inproc, home, "verify-chain")
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("OK ")
    return int(result.stdout.split()[1])


def process_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(extra)
    return env


def popen_ledger(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
        env=env or process_env(),
    )
