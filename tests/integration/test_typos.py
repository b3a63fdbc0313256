"""A mistyped command line is exactly one ``ledger: …`` line, exit 2, naming where help is.

The per-call commands (argparse) and the operator commands (typer) say it the
same way, so a person (or a script reading stderr) sees one kind of answer.
"""

import pytest

from tests.conftest import run_process


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["verifyy"],
            (
                "ledger: no such command 'verifyy' (did you mean 'verify-proof', "
                "'verify-chain', 'verify-export'?); see `ledger --help`"
            ),
        ),
        (
            ["keys", "rotat"],
            "ledger: no such command 'rotat' (did you mean 'rotate'?); see `ledger keys --help`",
        ),
        (["status", "--bogus"], "ledger: no such option: --bogus; see `ledger status --help`"),
        (["--bogus", "status"], "ledger: no such option: --bogus; see `ledger --help`"),
        (["explain"], "ledger: missing argument 'VERDICT_REF'; see `ledger explain --help`"),
        (
            ["verdict", "1", "--bogus"],
            "ledger: unrecognized arguments: --bogus; see `ledger verdict --help`",
        ),
        (
            ["usage", "--provider"],
            "ledger: argument --provider: expected one argument; see `ledger usage --help`",
        ),
    ],
)
def test_typo_is_one_line_with_where_help_is(tmp_path, args, line):
    """No usage block, no second line: what was wrong and which --help explains it."""
    result = run_process(["--home", str(tmp_path / "home"), *args])
    assert (result.code, result.stdout, result.stderr) == (2, "", line + "\n")
    assert not (tmp_path / "home").exists()


def test_a_command_group_alone_prints_its_help_as_a_usage_error(tmp_path):
    """``ledger`` or ``ledger keys`` alone names no command: help on stderr, one error line, exit 2."""
    for args, first, where in (
        (["keys"], "Usage: ledger keys", "ledger keys"),
        ([], "Usage: ledger [OPTIONS]", "ledger"),
    ):
        result = run_process(args)
        assert (result.code, result.stdout) == (2, ""), result
        assert result.stderr.startswith(first)
        assert result.stderr.endswith(f"ledger: missing command; see `{where} --help`\n")
