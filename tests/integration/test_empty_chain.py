# ruff: noqa: S608 - schema names are the tests' own identifiers
"""``verify-chain`` on a home or fleet with no entries yet: ``OK 0 entries``, unless entries existed.

A checkpoint or the derived state is the evidence that entries existed; then the
empty chain is ``BROKEN line 1: entry missing``. Messages about a fleet's chain
name its database, never a file.
"""

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.gate_helpers import env_at
from tests.integration.test_agent_helpers import cli
from tests.pg import STORES


def _on_postgres(home: Path) -> bool:
    return "\n[store]\n" in (home / "ledger.toml").read_text()


def _empty_the_chain(home: Path, request: pytest.FixtureRequest) -> None:
    if not _on_postgres(home):
        (home / "events.jsonl").unlink()
        return
    import psycopg

    server = request.getfixturevalue("pg_server")
    schema = request.getfixturevalue("pg_store_env")["LEDGER_STORE_SCHEMA"]
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("SET ledger.recovering = 'on'")
        conn.execute(f'DELETE FROM "{schema}".chain')


@STORES
def test_a_home_with_no_entries_yet_verifies_as_ok_0_entries(home: Path, run_inproc: Any):
    result = cli(run_inproc, home, "verify-chain", env=env_at())
    assert (result.code, result.stdout, result.stderr) == (0, "OK 0 entries\n", "")
    as_json = cli(run_inproc, home, "verify-chain", "--json", env=env_at())
    assert as_json.code == 0
    assert as_json.json() == {"ok": True, "entries": 0, "line": None, "reason": None}


@STORES
def test_an_emptied_chain_whose_state_folded_entries_is_broken_at_line_1(
    home: Path, run_inproc: Any, request: pytest.FixtureRequest
):
    ref = cli(run_inproc, home, "verdict", "1", env=env_at())
    assert ref.code == 0, ref.stderr
    _empty_the_chain(home, request)
    result = cli(run_inproc, home, "verify-chain", env=env_at())
    assert result.code == 1
    assert result.stderr.startswith("BROKEN line 1: entry missing"), result.stderr
    assert "events.jsonl" not in result.stderr


@STORES
def test_an_emptied_chain_after_a_checkpoint_is_broken_at_line_1(
    home: Path, run_inproc: Any, request: pytest.FixtureRequest
):
    assert cli(run_inproc, home, "verdict", "1", env=env_at()).code == 0
    assert cli(run_inproc, home, "checkpoint", env=env_at()).code == 0
    _empty_the_chain(home, request)
    shutil.rmtree(home / "state", ignore_errors=True)  # the checkpoint alone is the evidence
    result = cli(run_inproc, home, "verify-chain", env=env_at())
    assert result.code == 1
    assert result.stderr.startswith("BROKEN line 1: entry missing"), result.stderr
