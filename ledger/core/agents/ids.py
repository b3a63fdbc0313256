"""Names of agent budgets (convoys, agents, workflows) and the errors about them."""

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from ledger.errors import LedgerError, UsageError

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
ID_RE = re.compile(ID_PATTERN)
PHASE_PATTERN = r"^[^\u0000-\u001f\u007f]{1,128}$"
PHASE_RE = re.compile(PHASE_PATTERN)
PCT_PATTERN = r"^(100(\.0+)?|[0-9]{1,2}(\.[0-9]+)?)$"
_PCT_RE = re.compile(PCT_PATTERN)
# The largest integer every JSON reader keeps exactly (RFC 8785 refuses larger ones).
MAX_COUNT = 2**53 - 1
_INT_RE = re.compile(r"\s*[0-9]+\s*")
_DECIMAL_RE = re.compile(r"\s*[0-9]+(\.[0-9]+)?\s*")


class UnknownBudgetError(LedgerError):
    """A command names a convoy, workflow or agent that has no budget (exit 1)."""


def check_id(value: str, what: str) -> str:
    """``value`` if it is a valid budget name.

    Raises:
        UsageError: not ``^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$``.
    """
    if not ID_RE.fullmatch(value):
        raise UsageError(f"{what}: {value!r} is not a valid name ({ID_PATTERN})")
    return value


def check_phase(value: str) -> str:
    """``value`` if it is a valid phase name (1-128 printable characters).

    Raises:
        UsageError: empty, too long, or holds control characters.
    """
    if not PHASE_RE.fullmatch(value):
        raise UsageError(f"NAME: {value!r} is not a valid phase name (1-128 printable characters)")
    return value


def parse_count(text: str, what: str, *, minimum: int = 0) -> int:
    """A whole number ``≥ minimum`` (and at most ``2**53 - 1``) from the command line.

    Raises:
        UsageError: negative, fractional, not a number, below ``minimum`` or too large.
    """
    if not _INT_RE.fullmatch(text):
        if text.strip().startswith("-"):
            raise UsageError(f"{what}: negative number {text}")
        raise UsageError(f"{what}: not a whole number: {text!r}")
    value = int(text)
    if value < minimum:
        raise UsageError(f"{what}: must be ≥ {minimum}")
    if value > MAX_COUNT:
        raise UsageError(f"{what}: larger than {MAX_COUNT}")
    return value


def parse_pct(text: str, what: str) -> str:
    """A percentage in [0, 100] as canonical decimal text (``"80"``, ``"82.5"``).

    Raises:
        UsageError: not a number in [0, 100].
    """
    if not _DECIMAL_RE.fullmatch(text):
        raise UsageError(f"{what}: must be a percentage in [0, 100], got {text!r}")
    value = Decimal(text.strip())
    if value > 100:  # noqa: PLR2004
        raise UsageError(f"{what}: must be a percentage in [0, 100], got {text!r}")
    canonical = format(value.normalize(), "f")
    if not _PCT_RE.fullmatch(canonical):  # pragma: no cover - guaranteed by the checks above
        raise UsageError(f"{what}: must be a percentage in [0, 100], got {text!r}")
    return canonical


def parse_fraction(text: str, what: str, *, low: int, high: int) -> Fraction:
    """A decimal number in ``[low, high]``, exactly.

    Raises:
        UsageError: not a decimal number, or out of range.
    """
    try:
        if not _DECIMAL_RE.fullmatch(text):
            raise InvalidOperation
        value = Fraction(Decimal(text.strip()))
    except InvalidOperation as exc:
        raise UsageError(f"{what}: must be a number in [{low}, {high}], got {text!r}") from exc
    if not low <= value <= high:
        raise UsageError(f"{what}: must be a number in [{low}, {high}], got {text!r}")
    return value


def decimal_text(value: Fraction) -> str:
    """A number that has a finite decimal form, as canonical text (``0.6``, ``1``)."""
    return (
        format(Decimal(value.numerator) / Decimal(value.denominator), "f").rstrip("0").rstrip(".")
        if value.denominator != 1
        else str(value.numerator)
    )


def pct_value(text: str) -> Fraction:
    """A stored percentage text as an exact number."""
    return Fraction(Decimal(text))


def display_number(value: Fraction) -> int | float:
    """An exact number for JSON output: an integer when whole, else 4 decimals."""
    if value.denominator == 1:
        return int(value)
    return round(float(value), 4)
