"""The counter buckets: newest record wins, bound to where it was written, rewritten when doubled."""

from pathlib import Path

from ledger.edges.files import counterbuckets
from ledger.edges.files.counterbuckets import CounterBuckets, bucket_of

KEY = b"k" * 32


def _live(_record: object) -> bool:
    return True


def _reopened(buckets: CounterBuckets) -> CounterBuckets:
    """The buckets as the next load sees them (from the table the state file records)."""
    return CounterBuckets(buckets.directory, KEY, buckets.table())


def test_the_newest_record_of_a_counter_is_found(tmp_path: Path):
    buckets = CounterBuckets(tmp_path, KEY)
    buckets.save([("b", 0, "s1", {"used": 1})], _live)
    buckets.save([("b", 0, "s1", {"used": 2}), ("b", 0, "s2", {"used": 5})], _live)
    again = _reopened(buckets)
    assert again.find("b", 0, "s1") == {"used": 2}
    assert again.find("b", 0, "s2") == {"used": 5}
    assert again.find("b", 1, "s1") is None  # another epoch: a period that ended
    assert again.damage is None


def test_bytes_past_the_recorded_size_are_not_read(tmp_path: Path):
    buckets = CounterBuckets(tmp_path, KEY)
    buckets.save([("b", 0, "s1", {"used": 1})], _live)
    recorded = _reopened(buckets)
    buckets.save([("b", 0, "s1", {"used": 2})], _live)  # a save whose state was never written
    assert recorded.find("b", 0, "s1") == {"used": 1}


def test_a_record_moved_to_another_offset_fails_its_mac(tmp_path: Path):
    buckets = CounterBuckets(tmp_path, KEY)
    buckets.save([("b", 0, "s1", {"used": 1})], _live)
    buckets.save([("b", 0, "s1", {"used": 9})], _live)
    generation = buckets.entry(bucket_of("b", "s1"))[0]
    path = buckets.path(bucket_of("b", "s1"), generation)
    first, second = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(second + first)  # the newer record first, the older one last
    again = _reopened(buckets)
    assert again.find("b", 0, "s1") is None
    assert again.damage is not None
    assert not again.damage[1]  # edited, not lost


def test_a_bucket_cut_short_lost_records(tmp_path: Path):
    buckets = CounterBuckets(tmp_path, KEY)
    buckets.save([("b", 0, "s1", {"used": 1})], _live)
    bucket = bucket_of("b", "s1")
    path = buckets.path(bucket, buckets.entry(bucket)[0])
    path.write_bytes(path.read_bytes()[:-1])
    again = _reopened(buckets)
    assert again.find("b", 0, "s1") is None
    assert again.damage is not None
    assert again.damage[1]


def test_a_doubled_bucket_is_rewritten_with_its_newest_live_records(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(counterbuckets, "COMPACT_FLOOR", 0)
    buckets = CounterBuckets(tmp_path, KEY)
    bucket = bucket_of("b", "s1")
    dead = next(f"x{n}" for n in range(10_000) if bucket_of("b", f"x{n}") == bucket)
    buckets.save([("b", 0, "s1", {"used": 1}), ("b", 0, dead, {"used": 1})], _live)
    for used in range(2, 6):
        buckets.save([("b", 0, "s1", {"used": used})], lambda record: record["v"] != dead)
    generation = buckets.entry(bucket)[0]
    assert generation > 1
    lines = buckets.path(bucket, generation).read_bytes().splitlines()
    assert len(lines) < 5  # five saves, and a rewrite kept one record of them
    assert all(dead.encode() not in line for line in lines)
    assert _reopened(buckets).find("b", 0, "s1") == {"used": 5}
    assert buckets.path(bucket, 1) in buckets.obsolete
