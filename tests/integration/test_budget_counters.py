"""Per-value budget counters stored apart from ``derived.json``, read only where touched.

A ``per = "session"`` budget keeps one counter per session, a row in the
derived index. A verdict reads its own session's row and nothing else of the
others, the state file does not grow with sessions, and damage is caught for
the counter it touches: an index that lost commits is folded afresh from the
chain; an edited row halts ``counter_inconsistent`` until ``rebuild-state``.
"""

import contextlib
import functools
import json
import sqlite3
from pathlib import Path
from typing import Any

from ledger.batching import BatchRunner
from ledger.edges.files.indexdb import IndexDb
from ledger.runtime import Runtime
from ledger.services.gate import calls
from ledger.services.gate.budget_views import budget_rows
from tests.gate_helpers import env_at, state_path

BUDGET = [{"name": "per-session", "usd": 5, "period": "day", "per": "session"}]
NAME = "per-session"


def _env(seconds: float = 0, **extra: str) -> dict[str, str]:
    env: dict[str, str] = env_at(seconds, LEDGER_BUDGETS=json.dumps(BUDGET), **extra)
    return env


def _seal(runtime: Runtime, sessions: list[str], usd: str) -> None:
    for session in sessions:
        document, _ = calls.verdict(runtime, usd, "anthropic", cycle_id=session)
        calls.record(runtime, usd, "anthropic", verdict_ref=document["verdict_ref"],
                     cycle_id=session)  # fmt: skip


def _batch(runtime: Runtime, *, some: list[str], usd: str) -> None:
    _seal(runtime, some, usd)


def seed(home: Path, sessions: list[str], usd: str = "0.01") -> None:
    """A verdict and its record for each session, in group commits (as the gateway seals)."""
    runner = BatchRunner(home, _env(), lambda _line: None)
    for start in range(0, len(sessions), 200):
        some = sessions[start : start + 200]
        runner.run(functools.partial(_batch, some=some, usd=usd), lambda: None)
    runner.close()


def verdict(home: Path, session: str, usd: str = "1", seconds: float = 60) -> dict[str, Any]:
    """A one-shot verdict (the state read from and written to its files)."""
    document, _ = calls.verdict(Runtime(home, _env(seconds)), usd, "anthropic", cycle_id=session)
    return document


def sessions(count: int) -> list[str]:
    return [f"s-{n}" for n in range(count)]


def index(home: Path) -> sqlite3.Connection:
    """The home's derived index, opened as anyone could."""
    return sqlite3.connect(home / "state" / "index.sqlite3", isolation_level=None)


# A counter row's value and epoch, from its key (``indexdb.counter_key``).
VALUE = f"substr(CAST(k AS TEXT), {2 + len(NAME) + 16 + 1})"
EPOCH = f"substr(CAST(k AS TEXT), {2 + len(NAME) + 1}, 16)"


def sql(home: Path, statement: str, *args: Any) -> list[Any]:
    """Run ``statement``, its ``{value}`` and ``{epoch}`` standing for a counter row's."""
    with contextlib.closing(index(home)) as db:
        query = statement.format(value=VALUE, epoch=EPOCH)
        return db.execute(query, args).fetchall()


def test_the_state_file_does_not_grow_with_sessions(home: Path):
    """One session or 600: derived.json keeps the same size (its bucket table is fixed)."""
    seed(home, sessions(1))
    verdict(home, "s-0")
    small = state_path(home).stat().st_size
    seed(home, sessions(600))
    verdict(home, "s-0", seconds=2000)  # the first verdict's reservation has expired
    assert state_path(home).stat().st_size < small + 256  # 600 sessions inline: ~100 kB


def test_a_verdict_reads_only_its_own_counter(home: Path, monkeypatch):
    """At 600 sessions a verdict reads one row: its own session's counter."""
    seed(home, sessions(600))
    verdict(home, "s-7")  # the seeding's last batch is folded and saved
    read: list[str] = []
    original = IndexDb.find_counter

    def counting(self: IndexDb, budget: str, epoch: int, value: str, seq: int) -> Any:
        read.append(value)
        return original(self, budget, epoch, value, seq)

    monkeypatch.setattr(IndexDb, "find_counter", counting)
    monkeypatch.setattr(IndexDb, "scan_counters", None)  # never read whole
    assert verdict(home, "s-7", seconds=62)["verdict"] == "allow"
    assert set(read) == {"s-7"}


def test_every_value_is_still_seen_by_the_views(home: Path):
    """`budgets`, `status` and metrics list every session's counter, read from every bucket."""
    seed(home, sessions(300))
    rows = budget_rows(Runtime(home, _env(90)))
    assert rows["diagnostic"] is None
    assert sorted(row["per_value"] for row in rows["budgets"]) == sorted(sessions(300))
    assert {row["used_micros"] for row in rows["budgets"]} == {10_000}


def test_a_session_near_its_cap_halts_at_many_sessions(home: Path):
    """The counter read from its bucket holds the session's spend: $4.99 + $1 > $5."""
    seed(home, sessions(300))
    seed(home, ["s-42"], usd="4.98")
    assert verdict(home, "s-42")["verdict"] == "halt-100"
    assert verdict(home, "s-43", seconds=61)["verdict"] == "allow"


def _halted(decided: dict[str, Any]) -> None:
    assert (decided["verdict"], decided["uncertainty_reason"]) == (
        "halt-uncertainty", "counter_inconsistent"
    )  # fmt: skip
    assert "rebuild-state" in decided["diagnostic"]


def test_an_edited_counter_halts_only_the_verdicts_that_read_it(home: Path):
    """A counter row edited for one session: other sessions are decided as before."""
    names = sessions(300)
    seed(home, names)
    sql(home, "UPDATE counters SET counter = replace(counter, '\"used\":10000', '\"used\":0')"
        " WHERE {value} = 's-9'")  # fmt: skip
    assert verdict(home, "s-10")["verdict"] == "allow"
    halted = verdict(home, "s-9", seconds=61)
    _halted(halted)
    assert "derived index row" in halted["diagnostic"]


def test_a_counter_rolled_back_to_its_older_value_is_not_trusted(home: Path):
    """A row set back to the value it had a save earlier (prior and all) fails its MAC."""
    seed(home, ["s-1"], usd="1")
    seed(home, ["s-1"], usd="2")
    sql(home, "UPDATE counters SET counter = prior, seq = prior_seq WHERE {value} = 's-1'")
    _halted(verdict(home, "s-1"))


def test_a_row_renamed_to_another_session_is_not_trusted(home: Path):
    """A session's row moved to another session's name: that session is not given its spend."""
    seed(home, ["s-1"], usd="4")
    sql(home, "UPDATE counters SET k = CAST(replace(CAST(k AS TEXT), 's-1', 's-0') AS BLOB)"
        " WHERE {value} = 's-1'")  # fmt: skip
    _halted(verdict(home, "s-0"))
    assert verdict(home, "s-1", "4", seconds=61)["verdict"] != "allow"


def test_an_index_that_lost_commits_is_rebuilt_from_the_chain(home: Path):
    """The index rolled back to an older commit (a power loss): the state is folded afresh."""
    names = sessions(300)
    seed(home, names)
    database = home / "state" / "index.sqlite3"
    sql(home, "PRAGMA wal_checkpoint(TRUNCATE)")
    older = database.read_bytes()
    seed(home, ["s-5"], usd="4.98")
    for suffix in ("-wal", "-shm"):
        database.with_name(database.name + suffix).unlink(missing_ok=True)
    staged = database.with_name("staged")
    staged.write_bytes(older)
    staged.replace(database)
    decided = verdict(home, "s-5")
    assert (decided["verdict"], decided["deciding_cap"]) == (
        "halt-100", "budget:per-session[s-5]"
    )  # fmt: skip
    assert verdict(home, "s-6", seconds=61)["verdict"] == "allow"
    rows = budget_rows(Runtime(home, _env(90)))
    assert rows["diagnostic"] is None
    assert len(rows["budgets"]) == 300


def test_a_missing_index_is_rebuilt_from_the_chain(home: Path):
    """The index removed: the same as one that lost commits."""
    seed(home, sessions(50))
    seed(home, ["s-3"], usd="4.98")
    for suffix in ("", "-wal", "-shm"):
        (home / "state" / f"index.sqlite3{suffix}").unlink(missing_ok=True)
    assert verdict(home, "s-3")["verdict"] == "halt-100"


def test_a_save_whose_state_never_reached_its_file_counts_once(home: Path):
    """Counters written by a save whose derived.json was lost are read as the state knew them."""
    seed(home, ["s-1"], usd="1")
    verdict(home, "s-1", "0.01")
    state = state_path(home)
    older = state.read_bytes()
    seed(home, ["s-1"], usd="2")  # the index moves on: $3
    state.write_bytes(older)  # ... and the state file is as it was: $1 and a verdict
    rows = budget_rows(Runtime(home, _env(90)))["budgets"]
    assert rows[0]["used_micros"] == 3_000_000  # the lagging state caught up: once
    assert verdict(home, "s-1", "1.6", seconds=91)["verdict"] == "warn-90"  # $3 + $1.6 = 92 %
    assert budget_rows(Runtime(home, _env(92)))["budgets"][0]["used_micros"] == 3_000_000


def test_a_new_day_starts_every_session_afresh(home: Path):
    """Yesterday's counters count for nothing today, and older days leave the index."""
    seed(home, ["a", "b"], usd="4")
    tomorrow = 86_400.0
    assert verdict(home, "a", "4", seconds=tomorrow)["verdict"] == "allow"
    rows = budget_rows(Runtime(home, _env(tomorrow + 1)))
    assert [row["per_value"] for row in rows["budgets"]] == ["a"]
    assert rows["budgets"][0]["used_micros"] == 0
    for day in (2, 3):
        verdict(home, "a", "0.01", seconds=day * tomorrow)
    epochs = {
        epoch for (epoch,) in sql(home, "SELECT DISTINCT {epoch} FROM counters WHERE k > x''")
    }
    assert len(epochs) <= 2  # today's and the one before it, never every day's


def test_rebuild_state_gives_the_same_counters(home: Path, run_inproc):
    """rebuild-state folds the chain to the same figures for every session."""
    seed(home, sessions(100))
    before = budget_rows(Runtime(home, _env(90)))["budgets"]
    result = run_inproc(["--home", str(home), "rebuild-state"], _env(90))
    assert result.code == 0, result.stderr
    assert budget_rows(Runtime(home, _env(90)))["budgets"] == before


def test_the_resident_gate_writes_only_what_a_batch_changed(home: Path):
    """Through the batch runner, one verdict at 600 sessions writes the row or two it changed."""
    seed(home, sessions(600))
    runner = BatchRunner(home, _env(100), lambda _line: None)
    runner.run(lambda runtime: _seal(runtime, ["s-1"], "0.01"), lambda: None)
    runner.close()
    runner = BatchRunner(home, _env(101), lambda _line: None)
    runner.run(lambda runtime: _seal(runtime, ["s-2"], "0.01"), lambda: None)
    runner.close()
    [(newest,)] = sql(home, "SELECT value FROM meta WHERE name = 'seq'")
    written = sql(home, "SELECT {value} FROM counters WHERE seq = ?", newest)
    assert written == [("s-2",)]


def test_a_rolling_window_lists_only_sessions_with_spend_inside_it(home, monkeypatch):
    """Sessions whose spend left the window are not shown; their counters are not read."""
    monkeypatch.setitem(BUDGET[0], "period", "rolling:1h")
    seed(home, ["a", "b"], usd="4")
    later = 2 * 3600.0
    assert verdict(home, "a", "4", seconds=later)["verdict"] == "allow"  # a's $4 left the window
    rows = budget_rows(Runtime(home, _env(later + 1)))
    shown = [
        (row["per_value"], row["used_micros"], row["reserved_micros"]) for row in rows["budgets"]
    ]
    assert shown == [("a", 0, 4_000_000)]


def test_ten_budgets_per_session_read_ten_rows(home: Path, monkeypatch):
    """Every budget's counter of one session is one row: ten lookups, no scan."""
    many = [{"name": f"b{n}", "usd": 5, "period": "day", "per": "session"} for n in range(10)]
    env = env_at(0, LEDGER_BUDGETS=json.dumps(many))
    runner = BatchRunner(home, env, lambda _line: None)
    runner.run(functools.partial(_batch, some=sessions(50), usd="0.01"), lambda: None)
    runner.close()
    read: list[tuple[str, str]] = []
    original = IndexDb.find_counter

    def counting(self: IndexDb, budget: str, epoch: int, value: str, seq: int) -> Any:
        read.append((budget, value))
        return original(self, budget, epoch, value, seq)

    monkeypatch.setattr(IndexDb, "find_counter", counting)
    runtime = Runtime(home, env_at(60, LEDGER_BUDGETS=json.dumps(many)))
    document, _ = calls.verdict(runtime, "1", "anthropic", cycle_id="s-7")
    assert document["verdict"] == "allow"
    assert sorted(read) == [(f"b{n}", "s-7") for n in range(10)]
    monkeypatch.undo()
    rows = budget_rows(Runtime(home, env_at(90, LEDGER_BUDGETS=json.dumps(many))))["budgets"]
    spent = {row["name"]: row["used_micros"] for row in rows if row["per_value"] == "s-7"}
    assert spent == {f"b{n}": 10_000 for n in range(10)}
