"""Battery: served retries. Every served command is sealed exactly once, whoever runs it.

A client whose reply is late, or whose server was lost, runs its request again
in-process with the same request id. Every served command that seals
(``verdict``, ``record``, ``tokens check|record``, ``tools use|check``,
``turns record|check``, ``hook pre-tool-use|post-tool-use|stop``: all but ``usage``)
meets each of three faults, on real
``ledger serve`` and client processes:

* **late**: the server sealed and answered, the client had stopped waiting: its
  retry (a real process) must print the server's reply and seal nothing; the
  server, sent the same request again, seals nothing either;
* **killed**: the same, with the server SIGKILLed after sealing, before the retry;
* **stopped**: the server is SIGSTOPped holding the requests; each real client's
  wait (``LEDGER_SERVER_TIMEOUT``) expires, it runs the request itself and prints
  what an in-process run prints; on SIGCONT the server drains them all and must
  seal nothing more.

What "once" means comes from a reference home of the same shape where each
command runs once in-process: the number of entries it seals there. A command
sealed more often than that is a double count; fewer is a loss.
"""

import argparse
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger.server.protocol import Request
from tests.batteries.common import summary
from tests.conftest import Result, clean_env
from tests.integration.retry_helpers import as_result, retry, send_and_read
from tests.integration.server_helpers import (
    HOOKS,
    NOW,
    assert_verifies,
    entries,
    kill_quietly,
    ledger,
    normalized,
    start_server,
)
from tests.integration.test_server_lifecycle import raw_request

pytestmark = pytest.mark.timeout(600)

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "claude_code"
PRICES = """
[prices."anthropic/test-sonnet"]
input_per_mtok = 3
output_per_mtok = 15

[prices."anthropic/test-haiku"]
input_per_mtok = 1
output_per_mtok = 5
"""
SCOPE = {
    "LEDGER_AGENT": "agent-x",
    "LEDGER_WORKFLOW": "wf",
    # Stale billing never halts here: these are about counting, not the bill.
    "LEDGER_BILLING_STALE_HALT_PCT": "100",
}
SETUP = [
    ("tokens", "create", "convoy", "--convoy-max", "100000", "--agent-max", "60000"),
    ("tools", "create", "agent-x", "--role", "explorer"),
    ("turns", "create", "wf", "--total", "50", "--phase", "30"),
]


@dataclass(frozen=True)
class Command:
    name: str
    args: tuple[str, ...]
    hook_file: str | None = None  # a hook's stdin, from tests/fixtures/hooks
    whole_session: bool = False  # the transcript with its second part (new messages)


COMMANDS = [
    Command("verdict", ("verdict", "1", "--cycle-id", "battery")),
    Command("record", ("record", "0.5", "--provider", "openai", "--cycle-id", "battery")),
    Command("tokens check", ("tokens", "check", "convoy", "a1", "100")),
    Command("tokens record", ("tokens", "record", "convoy", "a1", "40", "50")),
    Command("tools use", ("tools", "use", "agent-x")),
    Command("tools check", ("tools", "check", "agent-x")),
    Command("turns record", ("turns", "record", "wf")),
    Command("turns check", ("turns", "check", "wf")),
    Command("hook pre-tool-use", ("hook", "pre-tool-use"), "pre_tool_use_bash.json"),
    Command("hook post-tool-use", ("hook", "post-tool-use"), "post_tool_use_bash.json"),
    Command("hook stop", ("hook", "stop"), "stop.json", whole_session=True),
    Command("hook user-prompt-submit", ("hook", "user-prompt-submit"), "user_prompt_submit.json"),
    # Settles the prompt's verdict at $0: the session ended before any call.
    Command("hook session-end", ("hook", "session-end"), "session_end.json"),
]
MODES = ("late", "killed", "stopped")


@dataclass
class Homes:
    """Homes on one store: the file in each home, or a PostgreSQL schema per home."""

    store: dict[str, str]  # LEDGER_STORE_URL and a base schema name; empty: the file store
    pg: Any = None  # the test PostgreSQL server, for counting rows

    def make(self, path: Path) -> tuple[Path, Path]:
        """A home with every budget the commands use, and a Claude Code transcript.

        On PostgreSQL the home gets a schema of its own (``init`` writes it into
        ``ledger.toml``). Beside the transcript, ``whole-`` + its name holds it with
        its second part.
        """
        home = path / "home"
        store = {**self.store, "LEDGER_STORE_SCHEMA": self._schema(home)} if self.store else {}
        made = ledger(home, "init", "--daily-cap-usd", "100", env=clean_env(**store))
        assert made.code == 0, made.stderr
        config = home / "ledger.toml"
        config.write_text(config.read_text() + PRICES)
        for args in SETUP:
            made = ledger(home, *args, env=_env(LEDGER_NO_SERVER="1"))
            assert made.code == 0, made.stderr
        transcript = path / "transcript.jsonl"
        transcript.write_bytes((TRANSCRIPTS / "session_part1.jsonl").read_bytes())
        whole = transcript.with_name("whole-" + transcript.name)
        whole.write_bytes(
            transcript.read_bytes() + (TRANSCRIPTS / "session_part2.jsonl").read_bytes()
        )
        return home, transcript

    def _schema(self, home: Path) -> str:
        return f"{self.store['LEDGER_STORE_SCHEMA']}_{home.parent.name}"

    def count(self, home: Path) -> int:
        """The number of entries in the home's chain."""
        if not self.store:
            return len(entries(home))
        table = f'"{self._schema(home)}".chain'
        rows = self.pg.sql(f"SELECT count(*) FROM {table}")  # noqa: S608 - the test's own schema
        return int(rows[0][0])


def _env(**extra: str) -> dict[str, str]:
    return clean_env(LEDGER_NOW=NOW, **SCOPE, **extra)


def _stdin(command: Command, transcript: Path) -> str | None:
    if command.hook_file is None:
        return None
    document = json.loads((HOOKS / command.hook_file).read_text())
    if command.whole_session:
        transcript = transcript.with_name("whole-" + transcript.name)
    document["transcript_path"] = str(transcript)
    return json.dumps(document)


def _request(home: Path, transcript: Path, command: Command, request_id: str) -> Request:
    request = raw_request(home, *command.args, request_id=request_id, **SCOPE)
    stdin = _stdin(command, transcript)
    request.stdin = stdin.encode() if stdin is not None else None
    return request


@dataclass
class Tally:
    runs: int = 0
    failed: int = 0
    double: int = 0
    lost: int = 0
    mismatched: int = 0
    problems: list[str] | None = None

    def check(self, label: str, sealed: int, expected: int, same_output: bool) -> None:
        self.runs += 1
        self.double += max(0, sealed - expected)
        self.lost += max(0, expected - sealed)
        self.mismatched += not same_output
        if sealed != expected or not same_output:
            self.failed += 1
            problems = self.problems if self.problems is not None else []
            problems.append(f"{label}: sealed {sealed} of {expected}, same output {same_output}")
            self.problems = problems


def _reference(tmp_path: Path, homes: Homes) -> tuple[list[int], list[Result]]:
    """Entries each command seals, and what it prints, run once in-process."""
    home, transcript = homes.make(tmp_path / "reference")
    counts, results = [], []
    for command in COMMANDS:
        before = homes.count(home)
        result = ledger(
            home, *command.args, env=_env(LEDGER_NO_SERVER="1"), stdin=_stdin(command, transcript)
        )
        counts.append(homes.count(home) - before)
        results.append(result)
    assert all(counts), f"every command must seal something here: {counts}"
    return counts, results


def _late_or_killed(
    tmp_path: Path, homes: Homes, mode: str, expected: list[int], tally: Tally
) -> None:
    home, transcript = homes.make(tmp_path / mode)
    server = start_server(home)
    firsts: list[tuple[Request, Result, int]] = []
    try:
        for index, command in enumerate(COMMANDS):
            request = _request(home, transcript, command, f"rq-{mode}-{index}")
            before = homes.count(home)
            first = as_result(send_and_read(home, request))
            firsts.append((request, first, homes.count(home) - before))
    finally:
        if mode == "killed":
            kill_quietly(server)
    try:
        for (request, first, sealed), command, count in zip(
            firsts, COMMANDS, expected, strict=True
        ):
            before = homes.count(home)
            again = retry(request)
            same = (again.code, again.stdout, again.stderr) == (
                first.code,
                first.stdout,
                first.stderr,
            )
            if mode == "late":
                third = as_result(send_and_read(home, request))
                same = same and third == first
            tally.check(f"{mode} {command.name}", sealed + homes.count(home) - before, count, same)
    finally:
        if mode == "late":
            assert server.stop() == 0
    assert assert_verifies(home) == homes.count(home)


def _stopped(
    tmp_path: Path, homes: Homes, expected: list[int], references: list[Result], tally: Tally
) -> None:
    home, transcript = homes.make(tmp_path / "stopped")
    server = start_server(home)
    sealed: list[int] = []
    results: list[Result] = []
    start = homes.count(home)
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        for command in COMMANDS:
            before = homes.count(home)
            stdin = _stdin(command, transcript)
            env = _env(LEDGER_SERVER_TIMEOUT="0.3")
            results.append(ledger(home, *command.args, env=env, stdin=stdin))
            sealed.append(homes.count(home) - before)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        assert server.stop() == 0  # drains every request it held
    assert server.served_count() == len(COMMANDS)
    after_drain = homes.count(home) - start - sum(sealed)
    for index, command in enumerate(COMMANDS):
        # Whatever the resumed server sealed counts against the command it ran.
        extra = after_drain if index == 0 else 0
        same = normalized([results[index]]) == normalized([references[index]])
        tally.check(f"stopped {command.name}", sealed[index] + extra, expected[index], same)
    assert assert_verifies(home) == homes.count(home)


@pytest.mark.parametrize("store_name", ["file", "postgres"])
def test_every_served_command_is_sealed_exactly_once_under_every_fault(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    store_name: str,
):
    """Late reply, server SIGKILLed after sealing, server SIGSTOPped: each command sealed
    exactly as often as one in-process run seals it, and the retry prints the first result;
    with the chain in the home's file and in PostgreSQL."""
    homes = Homes({})
    if store_name == "postgres":
        homes = Homes(request.getfixturevalue("pg_store_env"), request.getfixturevalue("pg_server"))
    expected, references = _reference(tmp_path, homes)
    tally = Tally()
    for mode in MODES:
        if mode == "stopped":
            _stopped(tmp_path, homes, expected, references, tally)
        else:
            _late_or_killed(tmp_path, homes, mode, expected, tally)
    summary(
        capsys, f"served-retries ({store_name} store)", tally.runs - tally.failed, tally.failed,
        f"{len(COMMANDS)} served commands x {len(MODES)} faults ({', '.join(MODES)}); "
        f"double counts {tally.double}, lost {tally.lost}, "
        f"retries printing other than the first result {tally.mismatched}",
    )  # fmt: skip
    assert tally.failed == 0, tally.problems
    assert (tally.double, tally.lost, tally.mismatched) == (0, 0, 0)


def test_the_battery_lists_every_served_command_that_seals():
    """The list above keeps up with what the server answers, every hook included."""
    from ledger.cli.client import SERVED
    from ledger.cli.percall.hooks import build

    hooks = argparse.ArgumentParser().add_subparsers()
    build(hooks)
    served = {
        f"{name} {action}".strip()
        for name, actions in SERVED.items()
        for action in (hooks.choices if name == "hook" else actions or {""})
    }
    read_only = {"usage"}  # the one served command that never seals
    # Read or write the caller's own Claude Code settings: always run in-process.
    never_served = {"hook install", "hook status"}
    assert served - read_only - never_served == {command.name for command in COMMANDS}
