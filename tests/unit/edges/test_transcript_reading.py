"""Reading a transcript is linear in its size, whatever its line lengths, in bounded memory."""

import tracemalloc
from pathlib import Path

import pytest

from ledger.edges.transcripts import TranscriptFile


class CountingFile(TranscriptFile):
    """A transcript that counts the bytes read through it."""

    bytes_read = 0

    def read_at(self, start: int, length: int) -> bytes:
        data = super().read_at(start, length)
        self.bytes_read += len(data)
        return data


@pytest.fixture
def mixed(tmp_path: Path) -> tuple[Path, bytes]:
    lines = [b"short\n", b"x" * 1000 + b"\n", b"\n", b"y" * 200 + b"\n", b"z" * 300]
    path = tmp_path / "t.jsonl"
    data = b"".join(lines)
    path.write_bytes(data)
    return path, data


def test_every_byte_is_read_once_and_long_lines_are_not_held(mixed):
    path, data = mixed
    transcript = CountingFile(str(path), chunk=64, max_line=256)
    try:
        found = list(transcript.lines(0))
    finally:
        transcript.close()
    assert transcript.bytes_read == len(data)
    assert found == [
        (0, 6, b"short\n"),
        (6, 1007, None),  # longer than max_line: its place only
        (1007, 1008, b"\n"),
        (1008, 1209, b"y" * 200 + b"\n"),
    ]
    # The last line has no newline yet, and is too long already.
    assert transcript.partial == (1209, len(data), True)


def test_a_too_long_line_is_read_on_from_where_it_was_left(mixed):
    path, data = mixed
    with path.open("ab") as handle:
        handle.write(b"z\n")
    transcript = CountingFile(str(path), chunk=64, max_line=256)
    try:
        found = list(transcript.lines(1209, oversized_from=len(data)))
    finally:
        transcript.close()
    assert found == [(1209, len(data) + 2, None)]
    assert transcript.bytes_read == 2  # only what was appended
    assert transcript.partial is None


def test_a_huge_line_without_newline_is_read_in_bounded_memory(tmp_path):
    path = tmp_path / "huge.jsonl"
    size = 24 << 20
    with path.open("wb") as handle:
        for _ in range(size >> 20):
            handle.write(b"a" * (1 << 20))
    transcript = TranscriptFile(str(path), max_line=4 << 20)
    tracemalloc.start()
    try:
        assert list(transcript.lines(0)) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        transcript.close()
    assert peak < 8 << 20  # the line is 24 MiB: at most max_line and a chunk are held
    assert transcript.partial == (0, size, True)
