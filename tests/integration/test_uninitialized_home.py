"""Commands against a home that was never initialized: one line saying so, exit 78, no files.

A mistyped ``--home`` used to give each command its own confusing answer (a
``counter_inconsistent`` usage, a missing daily cap, an unreadable trust store);
now every command but ``init`` and the hooks names the home and the fix.
"""

import os
from pathlib import Path

import pytest

from tests.conftest import clean_env, run_process

NO_HOME = "ledger: no ledger home at {home}: run `ledger init`\n"

# One command line per family: the per-call front door (argparse), each agent
# budget family, and the operator commands (typer).
COMMANDS = [
    ["verdict", "1", "--provider", "openai"],
    ["record", "0.5", "--provider", "openai"],
    ["usage"],
    ["tokens", "check", "c", "a", "5"],
    ["turns", "check", "wf"],  # advisory, but a missing home is no budget to advise on
    ["turns", "record", "wf"],
    ["tools", "check", "builder-1"],
    ["time", "status"],
    ["status"],
    ["report"],
    ["explain", "0123456789ab"],
    ["verify-chain"],
    ["checkpoint"],
    ["snapshot"],
    ["recover", "--dry-run"],
    ["reconcile"],
    ["rebuild-state"],
    ["metrics"],
    ["keys", "rotate"],
    ["prove", "inclusion", "1"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: "-".join(args[:2]))
def test_command_on_missing_home_says_run_init(tmp_path: Path, run_inproc, args):
    """Each command prints the one line naming the home and exits 78; nothing is created."""
    home = tmp_path / "never-initialized"
    result = run_inproc(["--home", str(home), *args])
    assert (result.code, result.stderr) == (78, NO_HOME.format(home=home)), result
    assert result.stdout == ""
    assert not home.exists()


def test_missing_home_from_the_environment_through_the_ledger_process(tmp_path: Path):
    """A real process with LEDGER_HOME naming no directory: the same line, nothing created."""
    home = tmp_path / "typo"
    for args in (["verdict", "1", "--provider", "openai"], ["status"]):
        result = run_process(args, env=clean_env(LEDGER_HOME=str(home)))
        assert (result.code, result.stderr) == (78, NO_HOME.format(home=home)), result
    assert not home.exists()


def test_init_still_creates_a_missing_home(tmp_path: Path, run_inproc):
    """``init`` is the one command that makes the home."""
    home = tmp_path / "new"
    result = run_inproc(["--home", str(home), "init", "--daily-cap-usd", "5"])
    assert result.code == 0, result.stderr
    assert (home / "ledger.toml").exists()


def test_offline_verification_of_a_given_log_needs_no_home(tmp_path: Path, run_inproc, home):
    """``verify-chain LOG`` checks only what the command line gives: no home involved."""
    run_inproc(["--home", str(home), "verdict", "1"])
    log = home / "events.jsonl"
    pem = next(home.glob("keys/*.pub.pem"), None) or next(home.rglob("*.pub*"))
    result = run_inproc(
        ["--home", str(tmp_path / "elsewhere"), "verify-chain", str(log), "--key", str(pem)]
    )
    assert result.code == 0, result
    assert not (tmp_path / "elsewhere").exists()


def test_version_prints_the_package_version():
    """``ledger --version`` prints ``ledger <version>``, the version of the package."""
    import ledger

    result = run_process(["--version"])
    assert (result.code, result.stdout, result.stderr) == (0, f"ledger {ledger.__version__}\n", "")
    assert os.sep not in result.stdout


NOT_A_HOME = "ledger: {home} is not a ledger home: run `ledger init`\n"


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: "-".join(args[:2]))
def test_command_on_a_folder_that_is_not_a_home_says_run_init(tmp_path: Path, run_inproc, args):
    """An existing folder without ledger.toml or keys/: one line, exit 78, nothing written."""
    folder = tmp_path / "projects"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    result = run_inproc(["--home", str(folder), *args])
    assert (result.code, result.stderr) == (78, NOT_A_HOME.format(home=folder)), result
    assert result.stdout == ""
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_a_folder_that_is_not_a_home_through_the_ledger_process(tmp_path: Path):
    """A real process, for a per-call and an operator command and the gateway: the same line."""
    folder = tmp_path / "src"
    folder.mkdir()
    for args in (["verdict", "1"], ["status"], ["proxy"], ["daemon"], ["serve"]):
        result = run_process(["--home", str(folder), *args])
        assert (result.code, result.stderr) == (78, NOT_A_HOME.format(home=folder)), result
    assert list(folder.iterdir()) == []
