"""The counter buckets: newest record wins, each bucket checked whole, rewritten when grown."""

from pathlib import Path

from ledger.edges.files import counterbuckets
from ledger.edges.files.counterbuckets import CounterBuckets, bucket_of


def _live(_record: object) -> bool:
    return True


def _reopened(buckets: CounterBuckets) -> CounterBuckets:
    """The buckets as the next load sees them (from the table the state file records)."""
    return CounterBuckets(buckets.directory, buckets.table())


def _file(buckets: CounterBuckets, bucket: str) -> Path:
    return buckets.path(bucket, buckets.entry(bucket).generation)


def test_the_newest_record_of_a_counter_is_found(tmp_path: Path):
    buckets = CounterBuckets(tmp_path)
    buckets.save([("b", 0, "s1", {"used": 1})], _live)
    buckets.save([("b", 0, "s1", {"used": 2}), ("b", 0, "s2", {"used": 5})], _live)
    again = _reopened(buckets)
    assert again.find("b", 0, "s1") == {"used": 2}
    assert again.find("b", 0, "s2") == {"used": 5}
    assert again.find("b", 1, "s1") is None  # another epoch: a period that ended
    assert again.damage is None


def test_bytes_past_the_recorded_size_are_not_read(tmp_path: Path):
    buckets = CounterBuckets(tmp_path)
    buckets.save([("b", 0, "s1", {"used": 1})], _live)
    recorded = _reopened(buckets)
    buckets.save([("b", 0, "s1", {"used": 2})], _live)  # a save whose state was never written
    assert recorded.find("b", 0, "s1") == {"used": 1}
    assert recorded.damage is None


def test_a_newest_record_made_unrecognisable_does_not_let_an_older_one_count(tmp_path: Path):
    buckets = CounterBuckets(tmp_path)
    buckets.save([("b", 0, "s1", {"used": 1})], _live)
    buckets.save([("b", 0, "s1", {"used": 9})], _live)
    path = _file(buckets, bucket_of("s1"))
    path.write_bytes(
        path.read_bytes().replace(b'"v":"s1","c":{"used":9}', b'"v":"s7","c":{"used":9}')
    )
    again = _reopened(buckets)
    assert again.find("b", 0, "s1") is None
    assert again.damage is not None
    assert not again.damage[1]  # edited, not lost


def test_records_swapped_in_place_are_caught(tmp_path: Path):
    buckets = CounterBuckets(tmp_path)
    buckets.save([("b", 0, "s1", {"used": 1})], _live)
    buckets.save([("b", 0, "s1", {"used": 9})], _live)
    path = _file(buckets, bucket_of("s1"))
    first, second = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(second + first)  # the older record last: it would count
    again = _reopened(buckets)
    assert again.find("b", 0, "s1") is None
    assert again.damage is not None


def test_a_bucket_cut_short_lost_records(tmp_path: Path):
    buckets = CounterBuckets(tmp_path)
    buckets.save([("b", 0, "s1", {"used": 1})], _live)
    path = _file(buckets, bucket_of("s1"))
    path.write_bytes(path.read_bytes()[:-1])
    again = _reopened(buckets)
    assert again.find("b", 0, "s1") is None
    assert again.damage is not None
    assert again.damage[1]


def test_a_grown_bucket_is_rewritten_with_its_newest_live_records(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(counterbuckets, "COMPACT_FLOOR", 0)
    buckets = CounterBuckets(tmp_path)
    bucket = bucket_of("s1")
    dead = next(f"x{n}" for n in range(10_000) if bucket_of(f"x{n}") == bucket)
    buckets.save([("b", 0, "s1", {"used": 1}), ("b", 0, dead, {"used": 1})], _live)
    for used in range(2, 6):
        buckets.save([("b", 0, "s1", {"used": used})], lambda record: record["v"] != dead)
    generation = buckets.entry(bucket).generation
    assert generation > 1
    lines = buckets.path(bucket, generation).read_bytes().splitlines()
    assert len(lines) < 5  # five saves, and a rewrite kept one record of them
    assert all(dead.encode() not in line for line in lines)
    assert _reopened(buckets).find("b", 0, "s1") == {"used": 5}
    assert buckets.path(bucket, 1) in buckets.obsolete


def test_every_budget_keeps_one_values_counters_in_one_bucket(tmp_path: Path):
    """Budgets kept per session: a session's counters under each of them, one file."""
    buckets = CounterBuckets(tmp_path)
    buckets.save([(f"b{n}", 0, "s1", {"used": n}) for n in range(10)], _live)
    assert [path.name for path in tmp_path.iterdir()] == [f"{bucket_of('s1')}.0.log"]
    again = _reopened(buckets)
    assert [again.find(f"b{n}", 0, "s1") for n in range(10)] == [{"used": n} for n in range(10)]


def test_the_table_names_each_changed_bucket_and_keeps_the_others(tmp_path: Path):
    """Saves into different buckets one after another: each reopened table finds them all."""
    buckets = CounterBuckets(tmp_path)
    values = [f"s{n}" for n in range(40)]
    for value in values:
        buckets.save([("b", 0, value, {"used": 1})], _live)
        buckets = _reopened(buckets)
    assert all(buckets.find("b", 0, value) == {"used": 1} for value in values)
    assert buckets.damage is None
