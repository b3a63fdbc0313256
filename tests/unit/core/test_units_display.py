"""Money and percentages for people: to the cent and to one decimal (display only)."""

from fractions import Fraction

import pytest

from ledger.core.units import cents_text, pct_for_people


class TestCentsText:
    @pytest.mark.parametrize(
        ("micros", "text"),
        [
            (9_500_000, "$9.50"),
            (1_204_000_000, "$1,204.00"),
            (438_141, "$0.44"),
            (5_000, "$0.01"),  # half a cent rounds up
            (4_999, "$0.00"),
            (-50_000, "-$0.05"),
            (0, "$0.00"),
        ],
    )
    def test_rounds_to_the_nearest_cent(self, micros, text):
        """An amount shows whole cents, half a cent and more rounding up."""
        assert cents_text(micros) == text

    def test_an_amount_left_rounds_down(self):
        """What is left to spend is never shown as more than it is."""
        assert cents_text(9_999, round_down=True) == "$0.00"
        assert cents_text(2_459_999, round_down=True) == "$2.45"


class TestPctForPeople:
    @pytest.mark.parametrize(
        ("value", "text"),
        [
            (Fraction(1102815, 10000), "110.3%"),
            (Fraction(25, 10), "2.5%"),
            (Fraction(0), "0.0%"),
            (Fraction(9995, 100), "100.0%"),
            (None, "-"),
        ],
    )
    def test_one_decimal(self, value, text):
        """A percentage shows one decimal, half a tenth rounding up."""
        assert pct_for_people(value) == text
