"""An incremental verification trusts a sealed segment by its stamp, never reading it (SPEC §21).

The verified mark (format 2) stamps each sealed segment inside the verified
prefix by file identity (device, inode, size, mtime, ctime, its manifest's
hash); an incremental ``verify-chain`` or ``checkpoint`` then reads only the
bytes after the last stamped segment. A segment written to (even with its
mtime set back: the ctime moves) or replaced (another inode) no longer
matches, and is read and verified again.
"""

import json
import os
import shutil
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from ledger.core.verified_mark import SealedStamp
from ledger.edges.files.segmentfiles import Segment, SegmentDir
from ledger.runtime import Runtime
from ledger.services.chain.verify import resume_point
from ledger.services.ports import ChainStore
from tests.helpers.segments import append_records, seal_every, segment_bytes

MARK = Path("state") / "verified-mark.json"


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """How many times each sealed segment's bytes were read (by number)."""
    counts: Counter[int] = Counter()
    original = SegmentDir.read

    def counted(self: SegmentDir, segment: Segment, offset: int = 0) -> Iterator[bytes]:
        counts[segment.number] += 1
        return original(self, segment, offset)

    monkeypatch.setattr(SegmentDir, "read", counted)
    return counts


@pytest.fixture
def checkpointed(home: Path, run_inproc) -> Path:
    """Segments 1–3 sealed (three entries each), one open entry, a checkpoint and its mark."""
    seal_every(home, 3)
    append_records(home, 10)
    assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
    return home


def _verify(run_inproc, home: Path) -> tuple[int, str, str]:
    result = run_inproc(["--home", str(home), "verify-chain"])
    return result.code, result.stdout, result.stderr


def _segment(home: Path, number: int) -> Path:
    return home / "segments" / f"{number:06d}.jsonl.zst"


def _edited(home: Path, number: int) -> bytes:
    """Segment ``number`` compressed again with one amount changed: the same size as before.

    Only the file's ctime then tells the edit (its manifest, inode and size
    unchanged, its mtime set back by the caller). A zstd skippable frame (which
    every reader passes over) pads the new file to the old one's size.
    """
    lines = segment_bytes(home, number).splitlines(keepends=True)
    size = _segment(home, number).stat().st_size
    for index, line in enumerate(lines):
        for digit in b"0123456789":
            changed = line.replace(b'"actual_micros":10', b'"actual_micros":1' + bytes([digit]))
            if changed == line:
                continue
            data = b"".join([*lines[:index], changed, *lines[index + 1 :]])
            for level in range(1, 20):
                for checksum in (False, True):
                    options = zstandard.ZstdCompressor(level=level, write_checksum=checksum)
                    packed = options.compress(data)
                    if len(packed) == size:
                        return packed
                    if len(packed) <= size - 8:
                        pad = size - len(packed) - 8
                        return packed + struct.pack("<II", 0x184D2A50, pad) + bytes(pad)
    raise AssertionError("no edit of the same compressed size")


def test_the_mark_stamps_every_sealed_segment_of_the_prefix(checkpointed: Path):
    document = json.loads((checkpointed / MARK).read_text())
    assert document["format"] == "ledger-verified-mark/2"
    stamps = document["sealed"]
    assert [stamp["number"] for stamp in stamps] == [1, 2, 3]
    info = _segment(checkpointed, 3).stat()
    assert (stamps[2]["inode"], stamps[2]["ctime_ns"]) == (str(info.st_ino), str(info.st_ctime_ns))


def test_an_untouched_home_verifies_incrementally_reading_no_sealed_segment(
    checkpointed: Path, run_inproc, reads: Counter[int]
):
    append_records(checkpointed, 1, first=10)  # a new entry in the open segment
    assert _verify(run_inproc, checkpointed) == (0, "OK 11 entries\n", "")
    assert reads == Counter()


def test_the_next_checkpoint_reads_only_the_chains_first_line_of_a_sealed_segment(
    checkpointed: Path, run_inproc, reads: Counter[int]
):
    append_records(checkpointed, 1, first=10)
    assert run_inproc(["--home", str(checkpointed), "checkpoint"]).code == 0
    # Under the lock the checkpoint checks the chain still begins with its
    # first entry (one frame of segment 1); segments 2 and 3 are never read.
    assert reads == Counter({1: 1})


def test_a_segment_sealed_after_the_mark_is_read_once_then_stamped(
    checkpointed: Path, run_inproc, reads: Counter[int]
):
    append_records(checkpointed, 3, first=10)  # seals segment 4
    assert _segment(checkpointed, 4).exists()
    assert run_inproc(["--home", str(checkpointed), "checkpoint"]).code == 0
    assert reads[2] == reads[3] == 0
    assert reads[4] >= 1
    document = json.loads((checkpointed / MARK).read_text())
    assert [stamp["number"] for stamp in document["sealed"]] == [1, 2, 3, 4]
    reads.clear()
    assert _verify(run_inproc, checkpointed)[:2] == (0, "OK 13 entries\n")
    assert reads == Counter()


def test_a_sealed_segment_edited_in_place_with_its_mtime_set_back_is_caught(
    checkpointed: Path, run_inproc
):
    path = _segment(checkpointed, 2)
    before = path.stat()
    edited = _edited(checkpointed, 2)
    path.chmod(0o644)
    with path.open("r+b") as handle:  # the same inode, the manifest untouched
        handle.write(edited)
        handle.truncate()
    path.chmod(0o444)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_size, before.st_mtime_ns,
    )  # fmt: skip
    runtime = Runtime(checkpointed, {})
    trust = runtime.keys.load_trust()
    assert (
        resume_point(runtime.chain, trust, runtime.newest_checkpoint(), runtime.verified_mark())
        is None
    )
    code, _out, err = _verify(run_inproc, checkpointed)
    assert code == 1
    assert err.startswith("BROKEN line 4"), err


def test_a_replaced_sealed_segment_is_read_again(
    checkpointed: Path, run_inproc, reads: Counter[int]
):
    path = _segment(checkpointed, 2)
    before = path.stat()
    copy = path.with_name("copy.tmp")
    shutil.copyfile(path, copy)  # the same bytes, another inode
    os.utime(copy, ns=(before.st_atime_ns, before.st_mtime_ns))
    copy.replace(path)
    assert _verify(run_inproc, checkpointed) == (0, "OK 10 entries\n", "")
    assert reads[2] >= 1


def test_a_replaced_and_edited_sealed_segment_is_caught(checkpointed: Path, run_inproc):
    path = _segment(checkpointed, 3)
    before = path.stat()
    copy = path.with_name("copy.tmp")
    copy.write_bytes(_edited(checkpointed, 3))
    os.utime(copy, ns=(before.st_atime_ns, before.st_mtime_ns))
    copy.replace(path)
    code, _out, err = _verify(run_inproc, checkpointed)
    assert code == 1
    assert err.startswith("BROKEN line 7"), err


def test_a_mark_of_the_old_format_is_checked_anew_and_replaced(
    checkpointed: Path, run_inproc, reads: Counter[int]
):
    mark = checkpointed / MARK
    document = json.loads(mark.read_text())
    document["format"] = "ledger-verified-mark/1"
    del document["sealed"]
    mark.write_text(json.dumps(document))
    assert Runtime(checkpointed, {}).verified_mark() is None
    assert _verify(run_inproc, checkpointed) == (0, "OK 10 entries\n", "")
    assert reads[1] >= 1  # from line 1
    assert run_inproc(["--home", str(checkpointed), "checkpoint"]).code == 0
    assert json.loads(mark.read_text())["format"] == "ledger-verified-mark/2"


def test_a_pass_during_which_a_segment_changed_keeps_no_mark(
    checkpointed: Path, monkeypatch: pytest.MonkeyPatch
):
    from dataclasses import replace

    from ledger.services.chain import streaming

    runtime = Runtime(checkpointed, {})
    trust = runtime.keys.load_trust()
    assert streaming.stream_verify(runtime.chain, trust).mark is not None
    real = streaming.stamps_of
    calls: list[int] = []

    def moved(store: ChainStore, end: int | None) -> tuple[SealedStamp, ...]:
        stamps = real(store, end)
        calls.append(len(calls))
        if len(calls) == 1:
            return stamps
        return (replace(stamps[0], ctime_ns=stamps[0].ctime_ns + 1), *stamps[1:])

    monkeypatch.setattr(streaming, "stamps_of", moved)
    passed = streaming.stream_verify(runtime.chain, trust)
    assert passed.report.ok
    assert passed.mark is None
