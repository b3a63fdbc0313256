"""The derived index (``state/index.sqlite3``): refs, idempotency keys and their expiry.

Every entry's ref is found through the index, reading only the entries the
stored state has not folded yet; a prefix of 12+ hex digits names an entry for
``explain``, ``prove inclusion`` and ``record --verdict-ref``; keys older than
``chain.idempotency_days`` leave the hot index and are still honoured (checked
in the chain); a rebuild from the chain gives the index an incremental run gave.
"""

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from ledger.edges.files.indexdb import IndexDb, Position
from ledger.edges.files.statefile import StateFile
from ledger.runtime import Runtime
from ledger.services.chain.refs import find_entries

DAY0 = "2026-03-02T10:00:00Z"
DAY40 = "2026-04-11T10:00:00Z"


def _cli(run_inproc, home: Path, *args: str, now: str = DAY0, **env: str):
    return run_inproc(["--home", str(home), *args], env={"LEDGER_NOW": now, **env})


def _verdicts(run_inproc, home: Path, count: int) -> list[str]:
    refs = []
    for _ in range(count):
        result = _cli(run_inproc, home, "verdict", "0.01", "--provider", "openai")
        assert result.code == 0, result.stderr
        refs.append(result.json()["verdict_ref"])
    return refs


def _record(run_inproc, home: Path, key: str, now: str = DAY0, **env: str) -> dict[str, Any]:
    result = _cli(run_inproc, home, "record", "1", "--provider", "openai",
                  "--idempotency-key", key, now=now, **env)  # fmt: skip
    assert result.code == 0, result.stderr
    document: dict[str, Any] = result.json()
    return document


def _sql(home: Path, statement: str, *args: Any) -> list[Any]:
    with contextlib.closing(sqlite3.connect(home / "state" / "index.sqlite3")) as db:
        rows = db.execute(statement, args).fetchall()
        db.commit()
        return rows


class _CountingChain:
    """The home's chain, counting the lines read from it."""

    def __init__(self, chain: Any) -> None:
        self.inner = chain
        self.lines_read = 0

    def iter_lines(self, start: int = 0, end: int | None = None) -> Any:
        for raw in self.inner.iter_lines(start, end):
            self.lines_read += 1
            yield raw


class _Deps:
    def __init__(self, runtime: Runtime) -> None:
        self.chain = _CountingChain(runtime.chain)
        self.states = runtime.states


def test_every_entry_is_found_by_a_prefix_of_its_ref_reading_a_line_or_two(home, run_inproc):
    refs = _verdicts(run_inproc, home, 60)
    lines = (home / "events.jsonl").read_bytes().splitlines()
    for line_number, ref in enumerate(refs, start=len(lines) - len(refs) + 1):
        deps = _Deps(Runtime(home, {"LEDGER_NOW": DAY0}))
        found = find_entries(deps, ref[:12])  # type: ignore[arg-type]
        assert [(entry.entry_hash, entry.line) for entry in found] == [(ref, line_number)]
        assert deps.chain.lines_read <= 2  # the entry itself, to check the index's answer
    deps = _Deps(Runtime(home, {"LEDGER_NOW": DAY0}))
    assert find_entries(deps, "0" * 12 if not refs[0].startswith("0" * 12) else "f" * 12) == []  # type: ignore[arg-type]


def test_entries_sealed_after_the_state_are_read_from_the_chain(home, run_inproc):
    """State and index that lag the chain (neither saved since): the tail is read, no more."""
    _verdicts(run_inproc, home, 5)
    state = home / "state"
    with contextlib.closing(sqlite3.connect(state / "index.sqlite3")) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    older = {name: (state / name).read_bytes() for name in ("derived.json", "index.sqlite3")}
    newest = _verdicts(run_inproc, home, 1)[0]
    for name, raw in older.items():
        (state / f"{name}.staged").write_bytes(raw)
        (state / f"{name}.staged").replace(state / name)
    for suffix in ("-wal", "-shm"):
        (state / f"index.sqlite3{suffix}").unlink(missing_ok=True)
    deps = _Deps(Runtime(home, {"LEDGER_NOW": DAY0}))
    found = find_entries(deps, newest[:14])  # type: ignore[arg-type]
    assert [entry.entry_hash for entry in found] == [newest]
    assert deps.chain.lines_read == 1  # the one entry past the state


def test_explain_and_prove_take_a_short_ref(home, run_inproc):
    refs = _verdicts(run_inproc, home, 8)
    target = refs[3]
    explained = _cli(run_inproc, home, "explain", target[:12], "--json")
    assert explained.code == 0, explained.stderr
    assert explained.json()["verdict_ref"] == target
    assert _cli(run_inproc, home, "checkpoint").code == 0
    whole = _cli(run_inproc, home, "prove", "inclusion", target)
    short = _cli(run_inproc, home, "prove", "inclusion", target[:13])
    assert whole.code == short.code == 0, short.stderr
    assert short.json() == whole.json()
    missing = "f" * 12 if not any(r.startswith("f" * 12) for r in refs) else "0" * 12
    assert _cli(run_inproc, home, "prove", "inclusion", missing).code == 1
    assert _cli(run_inproc, home, "prove", "inclusion", target[:11]).code == 2


def test_an_ambiguous_prefix_is_one_line_and_a_bad_command_line(home, run_inproc, monkeypatch):
    """Two entries under one prefix: refused with both lines named, exit 2, for each command."""
    _verdicts(run_inproc, home, 3)
    lines = (home / "events.jsonl").read_bytes().splitlines()
    from ledger.core.envelope import parse_line

    hashes = [parse_line(line).entry_hash for line in lines[-2:]]
    # Two real entries indexed under one prefix, as a collision of 12 digits would be.
    prefix = "abcdef012345"
    states = Runtime(home, {"LEDGER_NOW": DAY0}).states
    assert isinstance(states, StateFile)
    index = states.index()
    assert index is not None
    moved = [(prefix + entry_hash[len(prefix) :], entry_hash) for entry_hash in hashes]
    aliases = dict(moved)
    import ledger.services.chain.refs as refs_module

    real_holds = refs_module.holds
    monkeypatch.setattr(
        refs_module, "holds",
        lambda chain, offset, h: real_holds(chain, offset, aliases.get(h) or h),
    )  # fmt: skip
    with index.writing() as tx:
        rows = {m.entry_hash: m.position for m in index.find_refs(hashes[0][:12])}
        rows |= {m.entry_hash: m.position for m in index.find_refs(hashes[1][:12])}
        tx.add_refs((alias, rows[real]) for alias, real in moved)
    for args in (("explain", prefix), ("prove", "inclusion", prefix)):
        if args[0] == "prove":
            assert _cli(run_inproc, home, "checkpoint").code == 0
        result = _cli(run_inproc, home, *args)
        assert result.code == 2, (args, result.stdout, result.stderr)
        message = result.stderr.strip().splitlines()
        assert len(message) == 1, message
        assert "more than one entry" in message[0]


def test_an_edited_ref_row_is_not_believed(home, run_inproc):
    """A ref row pointing elsewhere fails its MAC: explain reads the chain, and is right."""
    refs = _verdicts(run_inproc, home, 4)
    _sql(home, "UPDATE refs SET entry = entry + 1, offset = 0 WHERE k = ?", bytes.fromhex(refs[1]))
    result = _cli(run_inproc, home, "explain", refs[1][:12], "--json")
    assert result.code == 0, result.stderr
    assert result.json()["verdict_ref"] == refs[1]
    assert not (home / "state" / "index.sqlite3").exists() or _sql(
        home, "SELECT count(*) FROM refs WHERE k = ? AND entry = ?", bytes.fromhex(refs[1]), 0
    ) == [(0,)]


def test_old_keys_leave_the_hot_index_and_still_count_once(home, run_inproc):
    first = [_record(run_inproc, home, f"old-{n}") for n in range(5)]
    assert all(not document["duplicate"] for document in first)
    assert len(_sql(home, "SELECT k FROM keys WHERE k > x''")) == 5
    _record(run_inproc, home, "new-0", now=DAY40)  # 39 days on: the old keys are 35+ days old
    hot = {bytes(k).decode() for (k,) in _sql(home, "SELECT k FROM keys WHERE k > x''")}
    assert hot == {"new-0"}
    assert len(_sql(home, "SELECT k FROM cold_keys WHERE k > x''")) == 5
    for n in range(5):
        assert _record(run_inproc, home, f"old-{n}", now=DAY40)["duplicate"] is True
    records = [
        line for line in (home / "events.jsonl").read_text().splitlines()
        if json.loads(line)["event_type"] == "budget.record_call"
    ]  # fmt: skip
    assert len(records) == 6


def test_a_shorter_idempotency_days_moves_keys_sooner(home, run_inproc):
    for n in range(3):
        _record(run_inproc, home, f"k-{n}", LEDGER_CHAIN_IDEMPOTENCY_DAYS="0")
    hot = {bytes(k).decode() for (k,) in _sql(home, "SELECT k FROM keys WHERE k > x''")}
    assert hot == {"k-0", "k-1", "k-2"}  # sealed at the same instant: none is older yet
    _record(run_inproc, home, "k-3", now="2026-03-02T10:00:01Z", LEDGER_CHAIN_IDEMPOTENCY_DAYS="0")
    hot = {bytes(k).decode() for (k,) in _sql(home, "SELECT k FROM keys WHERE k > x''")}
    assert hot == {"k-3"}
    assert _record(run_inproc, home, "k-1", now="2026-03-02T10:00:02Z")["duplicate"] is True


def test_a_cold_key_whose_entry_moved_is_looked_for_in_the_whole_chain(home, run_inproc):
    """A cold tag pointing at the wrong place is never taken at its word."""
    _record(run_inproc, home, "old")
    _record(run_inproc, home, "new", now=DAY40)
    _sql(home, "UPDATE cold_keys SET offset = 0 WHERE k > x''")
    assert _record(run_inproc, home, "old", now=DAY40)["duplicate"] is True


def _index_contents(home: Path) -> dict[str, Any]:
    """What the index holds, its rows' save numbers and MACs aside."""
    counters = {
        bytes(k): (None if text is None else json.loads(text))
        for k, text in _sql(home, "SELECT k, counter FROM counters WHERE k > x''")
    }
    return {
        "keys": {bytes(k).decode(): json.loads(r) for k, r in
                 _sql(home, "SELECT k, record FROM keys WHERE k > x''")},
        "cold": sorted(bytes(k) for (k,) in _sql(home, "SELECT k FROM cold_keys WHERE k > x''")),
        "refs": {bytes(k).hex(): (e, o) for k, e, o in
                 _sql(home, "SELECT k, entry, offset FROM refs WHERE k > x''")},
        "counters": counters,
    }  # fmt: skip


def test_a_rebuild_gives_the_index_the_calls_gave(home, run_inproc):
    budgets = json.dumps([{"name": "per-agent", "usd": 50, "period": "month", "per": "agent"}])
    env = {"LEDGER_BUDGETS": budgets}
    for n in range(6):
        verdict = _cli(run_inproc, home, "verdict", "0.5", "--provider", "openai",
                       "--agent", f"a-{n % 3}", **env)  # fmt: skip
        assert verdict.code == 0, verdict.stderr
        recorded = _cli(run_inproc, home, "record", "0.4", "--provider", "openai",
                        "--agent", f"a-{n % 3}", "--idempotency-key", f"k-{n}",
                        "--verdict-ref", verdict.json()["verdict_ref"][:12],
                        now=DAY40 if n == 5 else DAY0, **env)  # fmt: skip
        assert recorded.code == 0, recorded.stderr
    incremental = _index_contents(home)
    assert incremental["cold"]
    assert incremental["counters"]
    assert incremental["refs"]
    assert _cli(run_inproc, home, "rebuild-state", now=DAY40, **env).code == 0
    rebuilt = _index_contents(home)
    entries = len((home / "events.jsonl").read_bytes().splitlines())
    assert len(rebuilt["refs"]) == entries  # the rebuild's own entry included
    newest = max(rebuilt["refs"].items(), key=lambda item: item[1][0])[0]
    del rebuilt["refs"][newest]
    assert rebuilt == incremental


def test_position_rows_leave_room_for_segments(tmp_path: Path):
    index = IndexDb(tmp_path / "index.sqlite3", b"k" * 32)
    with index.writing() as tx:
        tx.add_refs([("ab" * 32, Position(3, 7, 100))])
    assert index.find_refs("abab" * 3)[0].position == Position(3, 7, 100)


def test_rebuild_state_finds_an_edited_row_and_replaces_it(home, run_inproc):
    """The operator's rebuild checks every row: an edit anywhere is reported and folded away."""
    _record(run_inproc, home, "a")
    _record(run_inproc, home, "b")
    _sql(home, "UPDATE keys SET record = replace(record, 'openai', 'opennai') WHERE k = ?", b"a")
    rebuilt = _cli(run_inproc, home, "rebuild-state")
    assert rebuilt.code == 0, rebuilt.stderr
    assert rebuilt.json()["previous_state"] == "mismatched"
    runtime = Runtime(home, {"LEDGER_NOW": DAY0})
    runtime.states.check_index()  # type: ignore[union-attr]
    assert _record(run_inproc, home, "a")["duplicate"] is True
