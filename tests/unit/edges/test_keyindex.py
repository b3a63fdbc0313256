"""The key index's bucket files (``ledger.edges.files.keyindex``)."""

from pathlib import Path

import pytest

from ledger.edges.files.keyindex import (
    IndexDamagedError,
    KeyIndex,
    bucket_of,
    find_in,
    lines_by_bucket,
)

MAC_KEY = b"k" * 32


def _record(key: str, entry: int) -> dict[str, object]:
    return {"key": key, "entry": entry, "entry_hash": f"{entry:064x}", "event_type": "tools.use"}


def _append(index: KeyIndex, *records: dict[str, object], recorded: int = 0) -> int:
    (bucket, lines), *_ = lines_by_bucket(records, MAC_KEY).items()
    return index.append(bucket, lines, recorded)


def test_a_record_whose_key_sorts_last_is_found(tmp_path: Path):
    """A served request's record has no field after ``key``."""
    index = KeyIndex(tmp_path / "index")
    _append(index, _record("request/rq-1", 3))
    raw = index.read(bucket_of("request/rq-1"), 0)
    found = find_in(raw, "request/rq-1", MAC_KEY)
    assert found is not None
    assert found["entry"] == 3
    assert find_in(raw, "request/rq-", MAC_KEY) is None


def test_the_first_record_of_a_key_wins(tmp_path: Path):
    index = KeyIndex(tmp_path / "index")
    size = _append(index, _record("a", 1))
    _append(index, _record("a", 9), recorded=size)
    found = find_in(index.read(bucket_of("a"), 0), "a", MAC_KEY)
    assert found is not None
    assert found["entry"] == 1


def test_a_torn_line_never_swallows_the_next_append(tmp_path: Path):
    index = KeyIndex(tmp_path / "index")
    size = _append(index, _record("a", 1))
    path = index.path(bucket_of("a"))
    path.write_bytes(path.read_bytes() + b'{"entry":2,"key":"a')  # a crash mid-append
    _append(index, _record("a", 3), recorded=size)
    last = path.read_bytes().split(b"\n")[-2]
    assert last.startswith(b'{"entry":3,')
    assert find_in(last + b"\n", "a", MAC_KEY) is not None


def test_a_shortened_bucket_is_damage_for_reads_and_appends(tmp_path: Path):
    index = KeyIndex(tmp_path / "index")
    size = _append(index, _record("a", 1))
    bucket = bucket_of("a")
    index.path(bucket).write_bytes(b"")
    with pytest.raises(IndexDamagedError):
        index.read(bucket, size)
    with pytest.raises(IndexDamagedError):
        _append(index, _record("a", 2), recorded=size)
    index.path(bucket).unlink()
    with pytest.raises(IndexDamagedError):
        index.read(bucket, size)
    assert index.read(bucket, 0) == b""


def test_an_edited_line_is_skipped(tmp_path: Path):
    index = KeyIndex(tmp_path / "index")
    _append(index, _record("a", 1))
    path = index.path(bucket_of("a"))
    path.write_bytes(path.read_bytes().replace(b'"entry":1', b'"entry":7'))
    assert find_in(path.read_bytes(), "a", MAC_KEY) is None


def test_replace_makes_the_index_exactly_the_records(tmp_path: Path):
    index = KeyIndex(tmp_path / "index")
    _append(index, _record("old", 1))
    (tmp_path / "keys").mkdir()  # an earlier version's per-key files
    sizes = index.replace(lines_by_bucket([_record("new", 1)], MAC_KEY))
    assert sizes == {bucket_of("new"): index.path(bucket_of("new")).stat().st_size}
    assert not (tmp_path / "keys").exists()
    if bucket_of("old") != bucket_of("new"):
        assert not index.path(bucket_of("old")).exists()
    assert find_in(index.read(bucket_of("new"), 0), "new", MAC_KEY) is not None
