"""The rollups are kept current by the long-lived writers and the daemon, not by reports."""

import json
import sqlite3
import threading
from pathlib import Path

from ledger.batching import BatchRunner
from ledger.runtime import Runtime
from ledger.services.gate.calls import record
from ledger.services.views.rollup_follower import RollupFollower

NOW = "2026-03-10T12:00:00Z"


def _position(home: Path) -> int | None:
    """The chain position the rollups reflect, read from their file (nothing caught up)."""
    path = home / "state" / "rollups.sqlite3"
    if not path.exists():
        return None
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT body FROM meta WHERE id = 1").fetchone()
    return None if row is None else int(json.loads(row[0])["entries"])


def _entries(home: Path) -> int:
    return len((home / "events.jsonl").read_bytes().splitlines())


def test_a_batch_writer_folds_its_records_into_the_rollups(home: Path) -> None:
    environ = {"LEDGER_NOW": NOW}
    runner = BatchRunner(home, environ, lambda _line: None)
    folded = threading.Event()
    real = runner.rollups.fold_once

    def fold_and_tell() -> None:
        real()
        if _position(home) == _entries(home) == 2:
            folded.set()

    runner.rollups.fold_once = fold_and_tell  # type: ignore[method-assign]
    try:
        for usd in ("1", "2.5"):

            def unit(runtime: Runtime, usd: str = usd) -> object:
                return record(runtime, usd, "openai", agent="coder")

            runner.run(unit, lambda: None)
        assert folded.wait(30)
    finally:
        runner.close()
    assert runner.rollups.folds >= 1


def test_the_daemons_job_folds_records_a_one_shot_command_sealed(home: Path, run_inproc) -> None:
    for usd in ("1", "2"):
        done = run_inproc(["--home", str(home), "record", usd, "--provider", "openai"],
                          {"LEDGER_NOW": NOW})  # fmt: skip
        assert done.code == 0, done.stderr
    assert _position(home) is None
    lines: list[str] = []
    RollupFollower(lambda: Runtime(home, {"LEDGER_NOW": NOW}), lines.append).fold_once()
    assert _position(home) == _entries(home) == 2
    assert lines == []


def test_a_follower_that_cannot_fold_says_so_once(home: Path) -> None:
    (home / "events.jsonl").write_bytes(b"not a chain entry\n")
    lines: list[str] = []
    follower = RollupFollower(lambda: Runtime(home, {"LEDGER_NOW": NOW}), lines.append)
    follower.fold_once()
    follower.fold_once()
    assert len(lines) == 1
    assert lines[0].startswith("rollups: not caught up: ")
