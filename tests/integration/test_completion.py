"""Shell completion is typer's own: --show-completion prints a script, the script completes."""

import subprocess
import sys

from tests.conftest import clean_env, run_process


def test_show_completion_prints_a_bash_script():
    """``ledger --show-completion`` (shell from $SHELL) prints the script to source."""
    result = run_process(["--show-completion"], env=clean_env(SHELL="/bin/bash"))
    assert result.code == 0, result.stderr
    assert "_LEDGER_COMPLETE=complete_bash" in result.stdout


def test_the_script_completes_command_names():
    """What the bash script asks ``ledger`` for: the commands that start with the word."""
    proc = subprocess.run(
        [sys.executable, "-m", "ledger"],
        env=clean_env(_LEDGER_COMPLETE="complete_bash", COMP_WORDS="ledger verd", COMP_CWORD="1"),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.stdout.split() == ["verdict"], proc
