"""The verified mark's stored form: stamps of sealed segments, older formats ignored."""

from dataclasses import replace

from ledger.core.canonical import canonical_bytes
from ledger.core.merkle import RootBuilder, leaf_hash
from ledger.core.verified_mark import SealedStamp, VerifiedMark, mark_from_document

_NS = 1_796_220_272_904_100_015  # beyond 2**53: stored as a string


def _stamp(number: int, end: int) -> SealedStamp:
    return SealedStamp(number, end, 65024, 2_155_370 + number, 600, _NS, _NS + 1, "ab" * 32)


def _mark(*stamps: SealedStamp) -> VerifiedMark:
    builder = RootBuilder()
    for index in range(3):
        builder.add(leaf_hash(bytes([index]) * 32))
    return VerifiedMark(
        chain_id="c" * 64, entries=3, lines=3, line_start=900, position=1000,
        head_hash="h" * 64, head_ts="2026-11-22T08:00:00.000000Z",
        frontier=tuple(node.hex() for node in builder.frontier()),
        prefix_sha256="p" * 64, trust_sha256="t" * 64, sealed=stamps,
    )  # fmt: skip


def test_a_mark_with_stamps_reads_back_as_written_through_canonical_json():
    mark = _mark(_stamp(1, 400), _stamp(2, 800))
    document = mark.to_document()
    canonical_bytes(document)  # times beyond 2**53 are strings, which canonical JSON takes
    assert document["format"] == "ledger-verified-mark/2"
    assert mark_from_document(document) == mark
    assert mark.hashed_from == 800
    assert _mark().hashed_from == 0


def test_a_mark_of_format_1_is_not_believed():
    document = _mark().to_document()
    document["format"] = "ledger-verified-mark/1"
    del document["sealed"]
    assert mark_from_document(document) is None


def test_stamps_out_of_order_or_past_the_mark_make_it_unusable():
    assert mark_from_document(_mark(_stamp(2, 400)).to_document()) is None
    assert mark_from_document(_mark(_stamp(1, 800), _stamp(2, 400)).to_document()) is None
    assert mark_from_document(_mark(_stamp(1, 1200)).to_document()) is None
    assert mark_from_document(replace(_mark(), sealed=()).to_document()) is not None
