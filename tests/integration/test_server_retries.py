"""A served request is sealed once, whoever runs it, and its retry prints the first result.

A client whose reply is late, or whose server was lost after it sealed, runs
the request again in-process with the same request id. Real server
processes, real clients, SIGSTOP and SIGKILL; each request's entries are found
in the chain by the request id they carry.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Result
from tests.integration.retry_helpers import (
    as_result,
    request_for,
    retry,
    sealed_for,
    send_and_read,
)
from tests.integration.server_helpers import (
    HOOKS,
    NOW,
    assert_verifies,
    entries,
    init_home,
    kill_quietly,
    ledger,
    no_server_env,
    normalized,
    served_env,
    start_server,
)
from tests.integration.test_server_lifecycle import raw_request

pytestmark = pytest.mark.timeout(300)

COMMANDS = {
    "tools use": ("tools", "use", "agent-x"),
    "verdict": ("verdict", "40", "--cycle-id", "c-1"),
}


def _home(path: Path) -> Path:
    home = init_home(path, cap="100")
    made = ledger(home, "tools", "create", "agent-x", "--role", "explorer", env=no_server_env())
    assert made.code == 0, made.stderr
    return home


def _reference(tmp_path: Path, args: tuple[str, ...]) -> Result:
    """The same command in-process on a fresh home of the same shape."""
    return ledger(_home(tmp_path / "reference"), *args, env=no_server_env())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_retry_beside_a_stopped_server_seals_once_and_the_resumed_server_seals_nothing(
    tmp_path: Path, name: str
):
    """The server is SIGSTOPped: the client's wait expires, it runs the request itself;
    on SIGCONT the server runs the same request, finds the retry's entry, seals nothing."""
    args = COMMANDS[name]
    home = _home(tmp_path / "home")
    before = len(entries(home))
    server = start_server(home)
    try:
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            client = ledger(home, *args, env=served_env(LEDGER_SERVER_TIMEOUT="0.5"))
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
    finally:
        assert server.stop() == 0  # drains: the held request is run now
    assert server.served_count() == 1
    assert normalized([client]) == normalized([_reference(tmp_path, args)])
    assert len(entries(home)) == before + 1
    assert assert_verifies(home) == len(entries(home))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_retry_after_the_server_sealed_and_was_killed_prints_the_first_result(
    tmp_path: Path, name: str
):
    """The server seals and answers, the answer never reaches the client, the server is
    SIGKILLed: the retry seals nothing and prints what the server answered."""
    home = _home(tmp_path / "home")
    before = len(entries(home))
    server = start_server(home)
    request = request_for(home, COMMANDS[name], "rq-killed-after-sealing")
    try:
        first = as_result(send_and_read(home, request))
    finally:
        kill_quietly(server)
    assert len(sealed_for(home, request.request_id)) == 1
    again = retry(request)
    assert (again.code, again.stdout, again.stderr) == (first.code, first.stdout, first.stderr)
    assert len(sealed_for(home, request.request_id)) == 1
    assert len(entries(home)) == before + 1
    assert assert_verifies(home) == len(entries(home))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_retry_after_a_late_reply_prints_the_first_result(tmp_path: Path, name: str):
    """The server sealed and is still running; the client gave up waiting: its retry
    prints the server's result, and a second run by the server changes nothing either."""
    home = _home(tmp_path / "home")
    before = len(entries(home))
    server = start_server(home)
    request = request_for(home, COMMANDS[name], "rq-late-reply")
    try:
        first = as_result(send_and_read(home, request))
        again = retry(request)
        third = as_result(send_and_read(home, request))
    finally:
        assert server.stop() == 0
    assert (again.code, again.stdout, again.stderr) == (first.code, first.stdout, first.stderr)
    assert third == first
    assert len(sealed_for(home, request.request_id)) == 1
    assert len(entries(home)) == before + 1


def test_a_verdict_retried_while_the_server_is_busy_reserves_once(tmp_path: Path):
    """A busy server (another request waits on a slow observer) answers late: the client
    retries in-process, and the server, reaching the request later, reserves nothing."""
    home = _home(tmp_path / "home")
    assert ledger(home, "record", "80", "--provider", "openai", env=no_server_env()).code == 0
    script = tmp_path / "slow_observer.py"
    script.write_text(
        "import pathlib, sys, time\n"
        "pathlib.Path(sys.argv[1]).write_text('running')\n"
        "deadline = time.monotonic() + 60\n"
        "while not pathlib.Path(sys.argv[2]).exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
        'print(\'{"usd_used": 80, "billing_ts": "\' + sys.argv[3] + \'"}\')\n'
    )
    started, release = tmp_path / "started", tmp_path / "release"
    observer = json.dumps([sys.executable, str(script), str(started), str(release), NOW])
    server = start_server(home)
    try:
        busy = subprocess.Popen(
            [sys.executable, "-m", "ledger", "--home", str(home), "verdict", "1"],
            env=served_env(LEDGER_OBSERVER_COMMAND=observer),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while not started.exists():
                assert busy.poll() is None, "the busy verdict ended before its observer ran"
                assert time.monotonic() < deadline, "the observer never started"
                time.sleep(0.02)
            late = ledger(
                home, "verdict", "2", "--cycle-id", "late",
                env=served_env(LEDGER_SERVER_TIMEOUT="0.5"),
            )  # fmt: skip
        finally:
            release.write_text("go")
            busy.wait(timeout=120)
    finally:
        assert server.stop() == 0
    assert server.served_count() == 2  # the late request was run by the server too
    assert late.code == 1, late.stderr  # 80 + 2 is above stale_halt_pct with no observer
    late_entries = [e for e in entries(home) if e["payload"].get("cycle_id") == "late"]
    assert len(late_entries) == 1, late_entries
    assert json.loads(late.stdout)["verdict_ref"] is not None


def _forget_replies(home: Path) -> None:
    """As if the server had been killed between its append and keeping its reply."""
    (home / "replies.jsonl").unlink()


def test_a_record_whose_server_died_before_keeping_its_reply_is_printed_as_first_sealed(
    tmp_path: Path,
):
    """No kept reply: the record, keyed by its request id, is found by that key and
    printed as the first run printed it; nothing sealed again."""
    home = _home(tmp_path / "home")
    server = start_server(home)
    request = request_for(home, ("record", "0.5", "--provider", "openai"), "rq-no-reply")
    try:
        first = as_result(send_and_read(home, request))
    finally:
        kill_quietly(server)
    _forget_replies(home)
    again = retry(request)
    assert (again.code, again.stdout) == (first.code, first.stdout)
    assert json.loads(again.stdout)["duplicate"] is False
    assert sealed_for(home, request.request_id) == ["budget.record_call"]


def test_a_request_whose_server_died_before_keeping_its_reply_is_not_sealed_again(
    tmp_path: Path,
):
    """No kept reply and no key of its own: one `ledger:` line, exit 74, and the tool
    call still counted once."""
    home = _home(tmp_path / "home")
    server = start_server(home)
    request = request_for(home, COMMANDS["tools use"], "rq-no-reply")
    try:
        assert as_result(send_and_read(home, request)).code == 0
    finally:
        kill_quietly(server)
    _forget_replies(home)
    again = retry(request)
    assert again.code == 74
    assert again.stdout == ""
    assert again.stderr.startswith("ledger: this request was already sealed")
    assert again.stderr.count("\n") == 1
    assert sealed_for(home, request.request_id) == ["tools.use"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_on_a_postgresql_store_a_served_request_is_sealed_once(
    tmp_path: Path, name: str, pg_store_env: dict[str, str]
):
    """The same guarantees with the chain and the key index in PostgreSQL: a retry after
    the server sealed and was killed prints the first result; a retry beside a stopped
    server seals, and the resumed server finds it and seals nothing."""
    args = COMMANDS[name]
    home = tmp_path / "home"
    pg = served_env(**pg_store_env)
    assert ledger(home, "init", "--daily-cap-usd", "100", env=pg).code == 0
    made = ledger(home, "tools", "create", "agent-x", "--role", "explorer", env=pg)
    assert made.code == 0, made.stderr
    before = _pg_entries(home, pg)

    server = start_server(home, env=pg)
    request = raw_request(home, *args, request_id="rq-pg-killed", **pg_store_env)
    try:
        first = as_result(send_and_read(home, request))
    finally:
        kill_quietly(server)
    again = retry(request)
    assert (again.code, again.stdout, again.stderr) == (first.code, first.stdout, first.stderr)
    assert _pg_entries(home, pg) == before + 1

    server = start_server(home, env=pg)
    try:
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            client = ledger(
                home, *args, env=served_env(LEDGER_SERVER_TIMEOUT="0.5", **pg_store_env)
            )
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
    finally:
        assert server.stop() == 0
    assert server.served_count() == 1
    assert client.code == first.code, client.stderr
    assert _pg_entries(home, pg) == before + 2


def _pg_entries(home: Path, env: dict[str, str]) -> int:
    """The number of entries in the store's chain (as verify-chain counts them)."""
    result = ledger(home, "verify-chain", env=env)
    assert result.code == 0, result.stderr
    return int(result.stdout.split()[1])


def test_a_pre_tool_use_hook_whose_reply_was_lost_denies_the_tool_call(tmp_path: Path):
    """No kept reply for a sealed PreToolUse: the retry seals nothing again and, as
    hooks do, fails closed: a deny decision, exit 0."""
    home = _home(tmp_path / "home")
    server = start_server(home)
    stdin = (HOOKS / "pre_tool_use_bash.json").read_text()
    request = request_for(home, ("hook", "pre-tool-use"), "rq-no-reply", stdin=stdin)
    try:
        assert as_result(send_and_read(home, request)).code == 0
    finally:
        kill_quietly(server)
    sealed = sealed_for(home, request.request_id)
    assert sealed
    _forget_replies(home)
    again = retry(request)
    assert again.code == 0
    decision = json.loads(again.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert "fail-closed" in decision["permissionDecisionReason"]
    assert again.stderr.startswith("ledger: this request was already sealed")
    assert sealed_for(home, request.request_id) == sealed
