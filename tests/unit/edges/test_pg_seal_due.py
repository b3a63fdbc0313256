"""When a writer seals the open range of a fleet's chain (``ledger.edges.postgres.segments``)."""

from ledger.edges.files.sealing import SegmentLimits
from ledger.edges.postgres.segments import OpenRange, seal_due

FIRST = "2026-11-20T08:00:00.000000Z"


def test_the_range_is_sealed_at_its_entry_count():
    open_now = OpenRange(number=2, last_seq=6, first_ts=FIRST)
    limits = SegmentLimits(entries=3)
    assert not seal_due(open_now, 8, FIRST, limits)
    assert seal_due(open_now, 9, FIRST, limits)


def test_an_empty_range_is_never_sealed():
    assert not seal_due(OpenRange(1, 9, None), 9, FIRST, SegmentLimits(entries=1))


def test_the_range_is_sealed_once_its_first_entry_is_old_enough():
    open_now = OpenRange(number=0, last_seq=0, first_ts=FIRST)
    limits = SegmentLimits(entries=1_000, days=2)
    assert not seal_due(open_now, 5, "2026-11-22T07:59:59.999999Z", limits)
    assert seal_due(open_now, 5, "2026-11-22T08:00:00.000000Z", limits)


def test_an_unreadable_time_never_seals_early():
    open_now = OpenRange(number=0, last_seq=0, first_ts="not a time")
    assert not seal_due(open_now, 5, FIRST, SegmentLimits(entries=1_000, days=1))
