"""Homes whose chain is sealed in tiny segments, and ways to read and damage them."""

import json
import os
import re
from pathlib import Path

import zstandard

from ledger.core.envelope import parse_line
from ledger.runtime import Runtime
from ledger.services.chain.writer import Writer
from tests.helpers.chains import record_payload


def seal_every(home: Path, entries: int) -> None:
    """Set ``chain.segment_entries`` in the home's ``ledger.toml``."""
    config = home / "ledger.toml"
    text, found = re.subn(
        r"(?m)^segment_entries = \d+", f"segment_entries = {entries}", config.read_text()
    )
    assert found == 1
    config.write_text(text)


def append_records(
    home: Path, count: int, first: int = 0, env: dict[str, str] | None = None
) -> list[str]:
    """Append ``count`` record entries; their hashes."""
    writer = Writer(Runtime(home, env or {}))
    return [
        writer.append_one("budget.record_call", record_payload(first + i)).entry_hash
        for i in range(count)
    ]


def manifest(home: Path, number: int) -> dict[str, object]:
    """Segment ``number``'s manifest."""
    document: dict[str, object] = json.loads((home / "segments" / f"{number:06d}.json").read_text())
    return document


def segment_bytes(home: Path, number: int) -> bytes:
    """Segment ``number``'s bytes, as ``zstd -d`` would give them."""
    path = home / "segments" / f"{number:06d}.jsonl.zst"
    with path.open("rb") as handle:
        reader = zstandard.ZstdDecompressor().stream_reader(handle, read_across_frames=True)
        return reader.read()


def segment_lines(home: Path, number: int) -> list[bytes]:
    """Segment ``number``'s lines."""
    return segment_bytes(home, number).splitlines(keepends=True)


def rewrite_segment(home: Path, number: int, data: bytes) -> None:
    """Replace a segment's bytes and make its manifest describe them (its checkpoint kept)."""
    path = home / "segments" / f"{number:06d}.jsonl.zst"
    os.chmod(path, 0o644)  # noqa: PTH101
    path.write_bytes(zstandard.ZstdCompressor().compress(data))
    document = manifest(home, number)
    lines = data.splitlines(keepends=True)
    document.update(size=len(data), lines=len(lines), entries=len(lines), frames=[[0, 0]])
    place = home / "segments" / f"{number:06d}.json"
    os.chmod(place, 0o644)  # noqa: PTH101
    place.write_text(json.dumps(document))


def hashes_of(lines: list[bytes]) -> list[str]:
    """Each line's entry hash."""
    return [parse_line(raw.rstrip(b"\n")).entry_hash for raw in lines]
