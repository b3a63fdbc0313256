"""Integer micro-USD through the gate's in-process entry points (``call_args.Micros``)."""

import pytest

from ledger.errors import UsageError
from ledger.services.gate.call_args import MAX_MICROS, Micros, amount


def test_micros_are_taken_as_they_are():
    assert amount(Micros(1_234_567), "EST_USD") == 1_234_567
    assert type(amount(Micros(5), "EST_USD")) is int


def test_text_is_still_usd():
    assert amount("1.234567", "EST_USD") == 1_234_567
    assert amount(5, "EST_USD") == 5_000_000  # a plain int is dollars, as on the command line


@pytest.mark.parametrize("value", [Micros(-1), Micros(MAX_MICROS + 1)])
def test_micros_out_of_range_are_refused(value: Micros):
    with pytest.raises(UsageError):
        amount(value, "EST_USD")
