"""Per-value budget counters stored apart from ``derived.json``, read only where touched.

A ``per = "session"`` budget keeps one counter per session. A verdict reads the
bucket of its own session's counter and nothing else of the others, the state
file does not grow with sessions, and damage to a bucket is caught for the
counter that lives in it: cut short, the state is folded afresh from the chain;
edited, the gate halts ``counter_inconsistent`` until ``rebuild-state``.
"""

import functools
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from ledger.batching import BatchRunner
from ledger.edges import fileio
from ledger.edges.files import counterbuckets
from ledger.edges.files.counterbuckets import CounterBuckets, bucket_of
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


def bucket_file(home: Path, session: str) -> Path:
    """The current generation of the bucket holding ``session``'s counter."""
    document = json.loads(state_path(home).read_text().splitlines()[0])
    bucket = bucket_of(session)
    generation = CounterBuckets(Path(), document["value_buckets"]).entry(bucket).generation
    return home / "state" / "counters" / f"{bucket}.{generation}.log"


def neighbour(session: str, among: list[str]) -> str:
    """Another session whose counter shares ``session``'s bucket."""
    return next(s for s in among if s != session and bucket_of(s) == bucket_of(session))


def pair(among: list[str]) -> tuple[str, str]:
    """Two sessions whose counters share a bucket."""
    seen: dict[str, str] = {}
    for session in among:
        bucket = bucket_of(session)
        if bucket in seen:
            return seen[bucket], session
        seen[bucket] = session
    raise AssertionError("no two sessions share a bucket")


def test_the_state_file_does_not_grow_with_sessions(home: Path):
    """One session or 600: derived.json keeps the same size (its bucket table is fixed)."""
    seed(home, sessions(1))
    verdict(home, "s-0")
    small = state_path(home).stat().st_size
    seed(home, sessions(600))
    verdict(home, "s-0", seconds=2000)  # the first verdict's reservation has expired
    assert state_path(home).stat().st_size < small + 256  # 600 sessions inline: ~100 kB


def test_a_verdict_reads_only_its_own_counters_bucket(home: Path, monkeypatch):
    """At 600 sessions a verdict reads one bucket: the one its session's counter is in."""
    seed(home, sessions(600))
    verdict(home, "s-7")  # the seeding's last batch is folded and saved
    read: list[str] = []
    original = CounterBuckets.read

    def counting(self: CounterBuckets, bucket: str) -> bytes | None:
        read.append(bucket)
        return original(self, bucket)

    monkeypatch.setattr(CounterBuckets, "read", counting)
    assert verdict(home, "s-7", seconds=62)["verdict"] == "allow"
    assert set(read) == {bucket_of("s-7")}


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


def _edit_counter(path: Path, session: str) -> None:
    """Change the spend in the newest record of ``session`` in its bucket."""
    raw = path.read_bytes()
    at = raw.rfind(f'"v":"{session}","c":'.encode())
    used = raw.index(b'"used":', at) + len(b'"used":')
    digit = raw[used : used + 1]
    replaced = b"0" if digit != b"0" else b"9"
    path.write_bytes(raw[:used] + replaced + raw[used + 1 :])


def test_an_edited_bucket_halts_only_the_verdicts_that_read_it(home: Path):
    """A bucket edited for one session: sessions in other buckets are decided as before."""
    names = sessions(300)
    seed(home, names)
    victim, neighbour_in_bucket = pair(names)
    elsewhere = next(s for s in names if bucket_of(s) != bucket_of(victim))
    _edit_counter(bucket_file(home, victim), victim)
    assert verdict(home, elsewhere)["verdict"] == "allow"
    for n, session in enumerate((victim, neighbour_in_bucket)):
        halted = verdict(home, session, seconds=61 + n)
        assert (halted["verdict"], halted["uncertainty_reason"]) == (
            "halt-uncertainty", "counter_inconsistent"
        )  # fmt: skip
        assert "counter bucket" in halted["diagnostic"]
        assert "rebuild-state" in halted["diagnostic"]


def test_a_newest_record_hidden_does_not_let_an_older_one_count(home: Path):
    """A session's newest record renamed to another session: its older one is not trusted."""
    seed(home, ["s-1"], usd="1")
    seed(home, ["s-1"], usd="2")
    path = bucket_file(home, "s-1")
    raw = path.read_bytes()
    at = raw.rfind(b'"v":"s-1"')
    path.write_bytes(raw[:at] + b'"v":"s-0"' + raw[at + len(b'"v":"s-1"') :])
    halted = verdict(home, "s-1")
    assert (halted["verdict"], halted["uncertainty_reason"]) == (
        "halt-uncertainty", "counter_inconsistent"
    )  # fmt: skip


def test_a_bucket_cut_short_is_rebuilt_from_the_chain(home: Path):
    """A bucket shorter than the state says lost records: the state is folded afresh."""
    names = sessions(300)
    seed(home, names)
    victim, other = pair(names)
    seed(home, [victim], usd="4.98")
    path = bucket_file(home, victim)
    path.write_bytes(path.read_bytes()[:-40])
    decided = verdict(home, victim)
    assert (decided["verdict"], decided["deciding_cap"]) == (
        "halt-100", f"budget:per-session[{victim}]"
    )  # fmt: skip
    assert verdict(home, other, seconds=61)["verdict"] == "allow"
    rows = budget_rows(Runtime(home, _env(90)))
    assert rows["diagnostic"] is None
    assert len(rows["budgets"]) == 300


def test_a_missing_bucket_is_rebuilt_from_the_chain(home: Path):
    """A bucket removed: the same as one cut short."""
    seed(home, sessions(50))
    seed(home, ["s-3"], usd="4.98")
    bucket_file(home, "s-3").unlink()
    assert verdict(home, "s-3")["verdict"] == "halt-100"


def test_bytes_past_the_recorded_size_are_ignored(home: Path):
    """Appends of a save that never finished do not count, and the next save starts afresh."""
    seed(home, ["s-1"], usd="1")
    path = bucket_file(home, "s-1")
    line = path.read_bytes().splitlines(keepends=True)[-1]
    forged = line.replace(b'"used":1000000', b'"used":9000000')
    with path.open("ab") as bucket:
        bucket.write(forged)
    assert verdict(home, "s-1", "3.6")["verdict"] == "warn-90"  # $1 used + $3.60 = 92 % of $5
    assert bucket_file(home, "s-1") != path  # written as a new generation
    assert not path.exists()


def test_a_new_day_starts_every_session_afresh(home: Path):
    """Yesterday's counters count for nothing today and leave the buckets when rewritten."""
    seed(home, ["a", "b"], usd="4")
    tomorrow = 86_400.0
    assert verdict(home, "a", "4", seconds=tomorrow)["verdict"] == "allow"
    rows = budget_rows(Runtime(home, _env(tomorrow + 1)))
    assert [row["per_value"] for row in rows["budgets"]] == ["a"]
    assert rows["budgets"][0]["used_micros"] == 0


def test_a_bucket_is_rewritten_once_it_doubles(home: Path, monkeypatch):
    """Many saves of one session: the bucket is rewritten with its newest record only."""
    monkeypatch.setattr(counterbuckets, "COMPACT_FLOOR", 2048)
    for n in range(12):
        seed(home, ["s-1"], usd="0.1")
        verdict(home, "s-1", "0.01", seconds=60 + n)
    path = bucket_file(home, "s-1")
    assert path.name != f"{bucket_of('s-1')}.1.log"
    assert len(path.read_bytes().splitlines()) < 6  # 24 saves: the newest record, and a few since
    assert len(list(path.parent.glob(f"{bucket_of('s-1')}.*.log"))) == 1
    rows = budget_rows(Runtime(home, _env(200)))
    assert rows["budgets"][0]["used_micros"] == 1_200_000


def test_rebuild_state_gives_the_same_counters(home: Path, run_inproc):
    """rebuild-state folds the chain to the same figures for every session."""
    seed(home, sessions(100))
    before = budget_rows(Runtime(home, _env(90)))["budgets"]
    result = run_inproc(["--home", str(home), "rebuild-state"], _env(90))
    assert result.code == 0, result.stderr
    assert budget_rows(Runtime(home, _env(90)))["budgets"] == before


def test_the_resident_gate_writes_only_what_a_batch_changed(home: Path):
    """Through the batch runner, one verdict at 600 sessions appends a record or two."""
    seed(home, sessions(600))
    counters = home / "state" / "counters"

    def total() -> int:
        return sum(path.stat().st_size for path in counters.iterdir())

    runner = BatchRunner(home, _env(100), lambda _line: None)
    runner.run(lambda runtime: _seal(runtime, ["s-1"], "0.01"), lambda: None)
    runner.close()
    before = total()
    runner = BatchRunner(home, _env(101), lambda _line: None)
    runner.run(lambda runtime: _seal(runtime, ["s-2"], "0.01"), lambda: None)
    runner.close()
    assert 0 < total() - before < 2048


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


def test_ten_budgets_per_session_read_one_bucket(home: Path, monkeypatch):
    """Every budget's counter of one session lives in that session's bucket: one file read."""
    many = [{"name": f"b{n}", "usd": 5, "period": "day", "per": "session"} for n in range(10)]
    env = env_at(0, LEDGER_BUDGETS=json.dumps(many))
    runner = BatchRunner(home, env, lambda _line: None)
    runner.run(functools.partial(_batch, some=sessions(50), usd="0.01"), lambda: None)
    runner.close()
    opened: list[tuple[str, bool]] = []
    original = fileio.open_regular

    def counting(path: Path, flags: int = os.O_RDONLY, **kwargs: Any) -> int:
        opened.append((path.name.split(".")[0], flags == os.O_RDONLY))
        return original(path, flags, **kwargs)

    monkeypatch.setattr(counterbuckets, "open_regular", counting)
    runtime = Runtime(home, env_at(60, LEDGER_BUDGETS=json.dumps(many)))
    document, _ = calls.verdict(runtime, "1", "anthropic", cycle_id="s-7")
    assert document["verdict"] == "allow"
    assert opened == [(bucket_of("s-7"), True), (bucket_of("s-7"), False)]  # one read, one append
    rows = budget_rows(Runtime(home, env_at(90, LEDGER_BUDGETS=json.dumps(many))))["budgets"]
    spent = {row["name"]: row["used_micros"] for row in rows if row["per_value"] == "s-7"}
    assert spent == {f"b{n}": 10_000 for n in range(10)}


def test_a_state_from_buckets_by_budget_is_rebuilt_not_misread(home: Path):
    """A state naming buckets an older version chose by budget and value is folded afresh.

    Read with today's choice, its counters would be looked for in other buckets
    and missed: the session would look unspent. Its spend is found again in the chain.
    """
    seed(home, ["s-1"], usd="4.5")
    path = state_path(home)
    body, _mac = path.read_bytes().rstrip(b"\n").split(b"\n")
    document = json.loads(body)
    document["counters"] = document.pop("value_buckets")
    old = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    key = (home / "keys" / "state-mac.key").read_bytes()
    signed = hmac.new(key, old, hashlib.sha256).hexdigest().encode()
    path.write_bytes(old + b"\n" + signed + b"\n")
    assert verdict(home, "s-1", usd="1")["verdict"] == "halt-100"
