"""The report's rollups: caught up incrementally, rebuilt identical, tampering refused."""

import json
import sqlite3
from pathlib import Path

import pytest

NOW = {"LEDGER_NOW": "2026-03-10T00:00:00Z"}


def _record(run_inproc, home: Path, usd: str, now: str, *extra: str) -> None:
    result = run_inproc(["--home", str(home), "record", usd, "--provider", "openai", *extra],
                        {"LEDGER_NOW": now})  # fmt: skip
    assert result.code == 0, result.stderr


def _month(run_inproc, home: Path, *extra: str):
    return run_inproc(["--home", str(home), "report", "--month", "2026-03", "--format", "json",
                       *extra], NOW)  # fmt: skip


def _cells(home: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(home / "state" / "rollups.sqlite3") as db:
        return sorted(db.execute("SELECT * FROM cells").fetchall())


@pytest.fixture
def spent(home: Path, run_inproc) -> Path:
    for day, usd in (("01", "1"), ("02", "2.5"), ("03", "0.25")):
        _record(run_inproc, home, usd, f"2026-03-{day}T12:00:00Z", "--agent", f"a{day}")
    return home


def test_rollups_fold_only_the_entries_after_their_position(spent, run_inproc):
    from ledger.runtime import build_runtime
    from ledger.services.views.rollups import catch_up

    first = catch_up(build_runtime(str(spent)))
    assert (first.entries, first.folded) == (3, 3)
    assert catch_up(build_runtime(str(spent))).folded == 0
    _record(run_inproc, spent, "4", "2026-03-04T12:00:00Z")
    again = catch_up(build_runtime(str(spent)))
    assert (again.entries, again.folded, again.rebuilt) == (4, 1, False)
    assert _month(run_inproc, spent).json()["totals"]["usd_micros"] == 7_750_000


def test_rebuild_state_rebuilds_the_rollups_identical(spent, run_inproc):
    assert _month(run_inproc, spent).code == 0
    incremental = _cells(spent)
    result = run_inproc(["--home", str(spent), "rebuild-state"], NOW)
    assert result.code == 0, result.stderr
    assert result.json()["rollup_entries"] == 4  # the chain's three records and its seal
    assert _cells(spent) == incremental
    (spent / "state" / "rollups.sqlite3").unlink()
    assert _month(run_inproc, spent).json()["totals"]["usd_micros"] == 3_750_000
    assert _cells(spent) == incremental


def _tamper(home: Path, statement: str) -> None:
    with sqlite3.connect(home / "state" / "rollups.sqlite3") as db:
        db.execute(statement)


@pytest.mark.parametrize(
    "statement",
    [
        # A cell's amount raised, its MAC left as it was.
        "UPDATE cells SET measures = '[1,9000000,0,0,0,0,0]' WHERE agent = 'a02'",
        # A cell removed: its day's summary no longer adds up.
        "DELETE FROM cells WHERE agent = 'a02'",
        # The saved position edited (folding would skip entries).
        "UPDATE meta SET body = replace(body, '\"entries\":3', '\"entries\":2')",
        # Not a database any more.
        None,
    ],
)
def test_a_tampered_rollup_is_refused_and_rebuilt_from_the_chain(spent, run_inproc, statement):
    assert _month(run_inproc, spent).code == 0
    if statement is None:
        (spent / "state" / "rollups.sqlite3").write_bytes(b"garbage" * 100)
        for suffix in ("-wal", "-shm"):
            (spent / "state" / f"rollups.sqlite3{suffix}").unlink(missing_ok=True)
    else:
        _tamper(spent, statement)
    result = _month(run_inproc, spent, "--by", "agent")
    assert result.code == 0, result.stderr
    assert "rebuilt from the chain" in result.stderr
    doc = result.json()
    assert [(row["agent"], row["usd_micros"]) for row in doc["rows"]] == [
        ("a01", 1_000_000), ("a02", 2_500_000), ("a03", 250_000)]  # fmt: skip
    assert doc["notes"]
    assert doc["totals"]["usd_micros"] == 3_750_000
    assert "rebuilt" not in _month(run_inproc, spent).stderr


def test_a_chain_cut_behind_its_checkpoint_fails_the_report(spent, run_inproc):
    assert run_inproc(["--home", str(spent), "checkpoint"], NOW).code == 0
    assert _month(run_inproc, spent).code == 0
    chain = spent / "events.jsonl"
    lines = chain.read_bytes().splitlines(keepends=True)
    chain.write_bytes(b"".join(lines[:-1]))
    result = _month(run_inproc, spent)
    assert result.code == 1
    assert "checkpoint" in result.stderr


def test_new_entries_that_do_not_verify_fail_the_report(spent, run_inproc):
    assert _month(run_inproc, spent).code == 0
    _record(run_inproc, spent, "4", "2026-03-04T12:00:00Z")
    chain = spent / "events.jsonl"
    lines = chain.read_bytes().splitlines(keepends=True)
    entry = json.loads(lines[-1])
    entry["payload"]["actual_micros"] = 1
    lines[-1] = json.dumps(entry).encode() + b"\n"
    chain.write_bytes(b"".join(lines))
    result = _month(run_inproc, spent)
    assert result.code == 1
    assert "BROKEN line 4" in result.stderr


def test_rollups_busy_with_another_reader_time_out_and_are_kept(spent, run_inproc):
    """A report that cannot get the rollups exits 75 and never drops them as damaged."""
    assert _month(run_inproc, spent).code == 0
    before = _cells(spent)
    holder = sqlite3.connect(spent / "state" / "rollups.sqlite3", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        result = run_inproc(
            ["--home", str(spent), "report", "--month", "2026-03"],
            {**NOW, "LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS": "1"},
        )
        assert result.code == 75, result.stderr
        assert "busy" in result.stderr
    finally:
        holder.rollback()
        holder.close()
    assert _cells(spent) == before


def test_a_long_catch_up_commits_as_it_goes(spent, run_inproc, monkeypatch):
    """A fold of more lines than a chunk commits each chunk: stopped, it keeps what it folded;
    the cells it leaves are those of one fold, and the report's totals the same."""
    from ledger.runtime import build_runtime
    from ledger.services.views import rollup_fold, rollups

    assert _month(run_inproc, spent).code == 0
    whole = _cells(spent)
    (spent / "state" / "rollups.sqlite3").unlink()
    monkeypatch.setattr(rollups, "CHUNK_LINES", 2)
    # Stopped at the second chunk: the first one's two lines are kept.
    calls = []
    real = rollup_fold.fold_range

    def stopped_at_the_second(*args, **kwargs):
        calls.append(args[2]["entries"])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(rollups, "fold_range", stopped_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        rollups.catch_up(build_runtime(str(spent)))
    monkeypatch.setattr(rollups, "fold_range", real)
    resumed = rollups.catch_up(build_runtime(str(spent)))
    assert calls == [0, 2]
    assert (resumed.entries, resumed.folded, resumed.rebuilt) == (3, 1, False)
    assert _cells(spent) == whole
    assert _month(run_inproc, spent).json()["totals"]["usd_micros"] == 3_750_000
