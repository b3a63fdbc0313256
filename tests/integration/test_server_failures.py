"""A server that cannot seal answers exactly as the in-process path would (SPEC §9).

Each home is broken in one way; the same commands run against it through a real
server and with ``LEDGER_NO_SERVER=1``, and must print the same thing with the
same exit code, promptly (no client waits on a server that cannot help it).
"""

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result, clean_env
from tests.integration.server_helpers import (
    HOOKS,
    NOW,
    init_home,
    ledger,
    normalized,
    start_server,
)

pytestmark = pytest.mark.timeout(300)

COMMANDS: list[tuple[tuple[bytes | str, ...], str | bytes | None]] = [
    (("verdict", "1.5", "--provider", "openai"), None),
    (("record", "0.5", "--provider", "openai"), None),
    (("record", "0.5", "--provider", "openai", "--idempotency-key", "k-9"), None),
    (("usage",), None),
    (("tokens", "check", "convoy", "a1", "10"), None),
    (("tools", "use", "agent-x"), None),
    (("hook", "pre-tool-use"), (HOOKS / "pre_tool_use_bash.json").read_text()),
]


def _torn_tail(home: Path) -> None:
    ledger(home, "verdict", "1", env=clean_env(LEDGER_NOW=NOW, LEDGER_NO_SERVER="1"))
    with (home / "events.jsonl").open("ab") as chain:
        chain.write(b'{"schema_version":"1.1.0","primitive_id":"L2","event_')


def _loose_key(home: Path) -> None:
    for key in (home / "keys").glob("*.key.pem"):
        key.chmod(0o644)


def _no_trust_store(home: Path) -> None:
    (home / "trust.json").unlink()


def _trust_store_is_a_directory(home: Path) -> None:
    (home / "trust.json").unlink()
    (home / "trust.json").mkdir()


def _bad_config(home: Path) -> None:
    (home / "ledger.toml").write_text("[usd]\ndaily_cap = 'lots'\n")


BREAKAGES: dict[str, Callable[[Path], None]] = {
    "torn tail": _torn_tail,
    "key file too open": _loose_key,
    "no trust store": _no_trust_store,
    "trust store is a directory": _trust_store_is_a_directory,
    "config invalid": _bad_config,
}


def _run_all(home: Path, served: bool) -> list[Result]:
    """COMMANDS with the relative home ``home`` from its parent, so messages match."""
    extra = {} if served else {"LEDGER_NO_SERVER": "1"}
    env = clean_env(LEDGER_NOW=NOW, **extra)
    return [
        ledger("home", *args, env=env, stdin=stdin, cwd=home.parent, timeout=60)
        for args, stdin in COMMANDS
    ]


def _keyless(results: list[Result]) -> list[Result]:
    """The two homes have different writer keys: their ids are not compared."""
    key_id = re.compile(r"\b[0-9a-f]{16}\b")
    return [
        Result(r.code, key_id.sub("<key>", r.stdout), key_id.sub("<key>", r.stderr))
        for r in results
    ]


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_a_broken_home_is_answered_as_in_process(tmp_path: Path, breakage: str):
    """Halts, exit codes and the one stderr line are the in-process ones."""
    homes = {}
    for side in ("served", "plain"):
        home = init_home(tmp_path / side / "home")
        assert ledger(home, "tokens", "create", "convoy", "--convoy-max", "99",
                      "--agent-max", "50").code == 0  # fmt: skip
        BREAKAGES[breakage](home)
        homes[side] = home
    server = start_server(homes["served"])
    try:
        served = _run_all(homes["served"], served=True)
    finally:
        assert server.stop() == 0
    plain = _run_all(homes["plain"], served=False)
    assert server.served_count() == len(COMMANDS)
    pairs = zip(COMMANDS, normalized(_keyless(served)), normalized(_keyless(plain)), strict=True)
    for (args, _stdin), a, b in pairs:
        assert a == b, args
    assert any(result.code != 0 for result in served)


def test_arguments_that_are_not_utf8_travel_as_bytes(tmp_path: Path):
    """A non-UTF-8 argument reaches the command as the in-process path sees it."""
    results = {}
    for side in ("served", "plain"):
        home = init_home(tmp_path / side / "home")
        env = clean_env(LEDGER_NOW=NOW, **({} if side == "served" else {"LEDGER_NO_SERVER": "1"}))
        server = start_server(home) if side == "served" else None
        try:
            results[side] = [
                ledger("home", "verdict", "1", "--cycle-id", b"caf\xe9", env=env, cwd=home.parent),
                ledger(
                    "home",
                    "record",
                    "1",
                    "--provider",
                    "openai",
                    "--model-id",
                    b"\xff",
                    env=env,
                    cwd=home.parent,
                ),
            ]
        finally:
            if server is not None:
                assert server.stop() == 0
                assert server.served_count() == 2
    assert normalized(results["served"]) == normalized(results["plain"])
    assert {r.code for r in results["served"]} == {2}


def test_a_stdin_too_large_for_a_request_is_answered_in_process(tmp_path: Path):
    """More than 16 MiB on a hook's stdin: not sent; the client answers it itself."""
    home = init_home(tmp_path / "home")
    server = start_server(home)
    big = b"x" * (17 << 20)
    try:
        result = ledger(home, "hook", "pre-tool-use", stdin=big)
    finally:
        assert server.stop() == 0
    plain = ledger(home, "hook", "pre-tool-use", stdin=big,
                   env=clean_env(LEDGER_NOW=NOW, LEDGER_NO_SERVER="1"))  # fmt: skip
    assert server.served_count() == 0
    assert (result.code, result.stdout, result.stderr) == (plain.code, plain.stdout, plain.stderr)
    assert "malformed input" in result.stderr


def test_a_full_disk_is_answered_as_in_process_and_heals(tmp_path: Path):
    """ENOSPC under the server: each request halts exactly as in-process, nothing torn;
    with space again, the same server seals."""
    from tests.batteries.test_battery_disk_full import fill, free, small_fs

    with small_fs("tmpfs", tmp_path / "fs") as mount:
        if isinstance(mount, str):
            pytest.skip(mount)
        home = init_home(mount / "home")
        server = start_server(home)
        try:
            assert ledger("home", "verdict", "1", cwd=mount).code == 0
            filler = fill(mount)
            plain_env = clean_env(LEDGER_NOW=NOW, LEDGER_NO_SERVER="1")
            for _ in range(50):  # the chain's last page may still hold a few lines
                if ledger("home", "verdict", "0.01", env=plain_env, cwd=mount).code == 1:
                    break
            answers = {}
            for side, extra in (("served", {}), ("plain", {"LEDGER_NO_SERVER": "1"})):
                env = clean_env(LEDGER_NOW=NOW, **extra)
                answers[side] = [
                    ledger("home", "verdict", "1", env=env, cwd=mount),
                    ledger("home", "record", "0.5", "--provider", "openai", env=env, cwd=mount),
                    ledger("home", "usage", env=env, cwd=mount),
                ]
            assert normalized(answers["served"]) == normalized(answers["plain"])
            assert answers["served"][0].code == 1
            assert "No space left on device" in answers["served"][0].stdout
            assert (home / "events.jsonl").read_bytes().endswith(b"\n")
            free(filler, 512)
            healed = ledger("home", "verdict", "1", cwd=mount)
            assert healed.code == 0, healed.stdout
        finally:
            assert server.stop() == 0
        assert server.served_count() == 5  # one before, three while full, one after
        assert ledger(home, "verify-chain", env=clean_env()).code == 0
