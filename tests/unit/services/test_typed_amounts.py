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


def test_the_python_api_records_micros_as_they_are(home):
    """``book.record(Micros(n))``: the SDK guards' amounts never pass through text."""
    from ledger.api import Ledger
    from ledger.api import Micros as ApiMicros

    book = Ledger(home)
    record = book.record(ApiMicros(1_234_567), provider="openai", idempotency_key="typed-1")
    assert record.actual_micros == 1_234_567
    floored = book.record(
        usage={"prompt_tokens": 1, "completion_tokens": 1}, provider="openai", model="gpt-4o",
        idempotency_key="typed-2", at_least_usd=ApiMicros(2_000_000),
    )  # fmt: skip
    assert floored.actual_micros == 2_000_000
