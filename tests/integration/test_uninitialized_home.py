"""Commands against a home that was never initialized: documented codes, no files created."""

from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["verdict", "1"], 78),  # no usd.daily_cap
        (["usage"], 0),
        (["verify-chain"], 2),
        (["checkpoint"], 65),
        (["reconcile"], 65),
        (["turns", "check", "wf"], 0),  # advisory: exit 0 always
        (["turns", "record", "wf"], 0),
        (["tokens", "check", "c", "a", "5"], 1),  # fails closed
        (["time", "status"], 0),
        (["status"], 0),
    ],
)
def test_command_on_missing_home(tmp_path: Path, run_inproc, args, code):
    """Each command exits with its documented code and leaves no trace behind."""
    home = tmp_path / "never-initialized"
    result = run_inproc(["--home", str(home), *args])
    assert result.code == code, result
    assert "Traceback" not in result.stderr
    assert len([line for line in result.stderr.splitlines() if line.startswith("ledger: ")]) <= 1
    assert not home.exists()
