"""Ids a caller picks are printable and at most 128 characters, wherever they enter.

On the command line a bad one is exit 2; in the Python API a ``LedgerError``
with exit code 2 (at the gateway: ``tests/gateway/test_gateway_ids.py``).
"""

import pytest

import ledger
from ledger.errors import LedgerError
from tests.gate_helpers import env_at

TOO_LONG = "s" * 129
BAD = ["x\x1b]8;;https://evil.example\x07", TOO_LONG, "tab\tin"]


@pytest.mark.parametrize("option", ["--cycle-id", "--agent"])
@pytest.mark.parametrize("value", BAD)
def test_the_command_line_refuses_a_bad_id_with_exit_2(run_inproc, home, option, value):
    result = run_inproc(["--home", str(home), "verdict", "0.01", option, value], env_at())
    assert result.code == 2, result
    assert result.stderr.startswith(f"ledger: {option}: ")
    assert result.stdout == ""


def test_the_command_line_refuses_a_bad_id_on_record_too(run_inproc, home):
    result = run_inproc(["--home", str(home), "record", "0.01", "--cycle-id", TOO_LONG], env_at())
    assert result.code == 2, result


def test_the_python_api_raises_a_ledger_error_with_exit_code_2(home, monkeypatch):
    for name, value in env_at().items():
        monkeypatch.setenv(name, value)
    book = ledger.open(home=home)
    with pytest.raises(LedgerError) as caught:
        book.verdict(estimate_usd="0.01", cycle_id="a\x00b")
    assert caught.value.exit_code == 2
