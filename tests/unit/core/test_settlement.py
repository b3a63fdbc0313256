"""The one settlement rule: recorded usage, else the estimate; $0 only before any answer."""

import pytest

from ledger.core.settlement import CallEnd, settle, unreadable_usage

ESTIMATE = 15_003


@pytest.mark.parametrize(
    ("end", "usage_micros", "expected"),
    [
        # Read to its end: the usage, else the estimate.
        (CallEnd(200, finished=True, content_began=True, has_usage=True), 13_500, 13_500),
        (CallEnd(200, finished=True, content_began=True), None, ESTIMATE),
        # Refused before any content: the usage reported, else $0.
        (CallEnd(529, error=True), None, 0),
        (CallEnd(200, error=True, has_usage=True), 3_015, 3_015),
        (CallEnd(None), None, 0),
        # Cut, timed out, closed early, or not fully readable: never below the estimate.
        (CallEnd(200, content_began=True, has_usage=True), 3_015, ESTIMATE),
        (CallEnd(200, content_began=True, has_usage=True), 20_000, 20_000),
        (CallEnd(200), None, ESTIMATE),
        (CallEnd(200, finished=True, unreadable=True, has_usage=True), 3_015, ESTIMATE),
        (CallEnd(200, error=True, content_began=True, has_usage=True), 3_015, ESTIMATE),
    ],
)
def test_settle(end, usage_micros, expected):
    assert settle(end, ESTIMATE).amount(usage_micros) == expected


def test_an_unpriced_usage_stays_unpriced():
    """The model has no price: the record carries no amount, and verdicts halt."""
    end = CallEnd(200, content_began=True, has_usage=True)
    assert settle(end, ESTIMATE).amount(None) is None


def test_unreadable_usage_is_the_estimate():
    assert unreadable_usage(ESTIMATE).amount(None) == ESTIMATE
