"""Exact money: integer micro-USD, parsed from decimal text, never from float sums."""

from decimal import ROUND_CEILING, Decimal, InvalidOperation, localcontext
from fractions import Fraction

MICROS_PER_USD = 1_000_000


def usd_to_micros(value: object, *, round_up: bool = True) -> int:
    """Convert a USD amount (text, int or TOML float) to integer micro-USD.

    A finer amount than one micro-dollar is rounded up: an estimate never comes
    out smaller than asked.

    Raises:
        ValueError: not a finite number.
    """
    if isinstance(value, bool):
        raise ValueError("not a number")
    try:
        # str() of a float is its shortest round-trip form: 0.1 stays 0.1.
        amount = Decimal(str(value).strip())
    except InvalidOperation as exc:
        raise ValueError(f"not a number: {value!r}") from exc
    if not amount.is_finite():
        raise ValueError(f"not a finite number: {value!r}")
    with localcontext() as context:
        # Enough digits that scaling by 10^6 is exact for any amount a person writes.
        context.prec = max(60, len(amount.as_tuple().digits) + 10)
        scaled = amount * MICROS_PER_USD
        if round_up:
            return int(scaled.to_integral_value(rounding=ROUND_CEILING))
        return int(scaled)


def micros_to_usd(micros: int) -> float:
    """A micro-USD amount as USD for people to read (display only, never summed)."""
    return float(Fraction(micros, MICROS_PER_USD))


def percent(numerator: int, denominator: int) -> Fraction:
    """``100 × numerator / denominator`` exactly (``denominator`` > 0)."""
    return Fraction(100 * numerator, denominator)


def pct_for_display(value: Fraction | None) -> float | None:
    """A percentage rounded to 4 decimals for JSON output."""
    return None if value is None else round(float(value), 4)


def usd_text(micros: int) -> str:
    """A micro-USD amount as exact dollar text for people: ``$12.50``, ``-$0.000125``."""
    whole, fraction = divmod(abs(micros), MICROS_PER_USD)
    cents = f"{fraction:06d}".rstrip("0").ljust(2, "0")
    return f"{'-' if micros < 0 else ''}${whole:,}.{cents}"


def cents_text(micros: int, *, round_down: bool = False) -> str:
    """A micro-USD amount to the cent for people: ``$9.50``, ``$1,204.00``.

    Half a cent rounds up, unless ``round_down`` (an amount left to spend is
    never shown larger than it is). Display only: JSON keeps exact figures.
    """
    cents, rest = divmod(abs(micros), MICROS_PER_USD // 100)
    if rest and not round_down and rest * 2 >= MICROS_PER_USD // 100:
        cents += 1
    whole, fraction = divmod(cents, 100)
    return f"{'-' if micros < 0 and cents else ''}${whole:,}.{fraction:02d}"


def pct_text(value: float | str | Fraction | None) -> str:
    """A percentage from a document (``"47.5100"``, ``42.0``) as ``status`` shows it: ``47.5%``."""
    if value is None:
        return "-"
    return pct_for_people(value if isinstance(value, Fraction) else Fraction(str(value)))


def pct_for_people(value: Fraction | None) -> str:
    """A percentage to one decimal for people (``110.3%``); ``-`` when there is none."""
    if value is None:
        return "-"
    tenths = (value * 10 + Fraction(1, 2)).__floor__()
    return f"{tenths // 10}.{tenths % 10}%"
