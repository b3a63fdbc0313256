"""The daemon's verification: incremental at start, every entry on each later run."""

from pathlib import Path

import pytest

from ledger.daemon.jobs import VerifyJob
from ledger.runtime import Runtime
from tests.conftest import clean_env
from tests.helpers.bighome import append_entries

ENTRIES = 30


def test_the_first_run_resumes_at_the_checkpoint_and_later_runs_read_every_entry(
    home: Path, run_inproc, capsys: pytest.CaptureFixture[str]
):
    append_entries(home, ENTRIES, clean_env())
    assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
    capsys.readouterr()
    job = VerifyJob(lambda: Runtime(home, clean_env()))
    job()
    first = capsys.readouterr().err
    assert f"verify: OK {ENTRIES} entries (entries after {ENTRIES} checked" in first
    job()
    second = capsys.readouterr().err
    assert f"verify: OK {ENTRIES} entries\n" in second
