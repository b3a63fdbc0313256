"""A new key's own cap in a ``per = "key"`` budget: ``keys issue NAME --budget NAME=USD``.

Pure: the option's text is checked against the budgets as configured and
becomes the ``usd_for`` entry the edge writes into ``ledger.toml`` (the same
entry an operator would write by hand, first in the table so that no glob
written before it shadows the key's own cap).
"""

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from ledger.core.budgets import Budget
from ledger.core.units import usd_to_micros
from ledger.errors import UsageError

_MAX_MICROS = 2**53 - 1


class KeyCap(NamedTuple):
    """A budget name and the cap (its TOML value, and in micro-USD) a new key gets in it."""

    budget: str
    usd: int | float
    micros: int


def _toml_number(text: str) -> int | float:
    """``text`` as the number TOML writes: an integer when whole, else the float it reads as."""
    try:
        amount = Decimal(text)
    except InvalidOperation as exc:
        raise ValueError(f"not a number: {text!r}") from exc
    if not amount.is_finite():
        raise ValueError(f"not a finite number: {text!r}")
    if amount == amount.to_integral_value():
        return int(amount)
    number = float(amount)
    if usd_to_micros(number) != usd_to_micros(amount):
        raise ValueError(f"{text!r} has more digits than a cap can keep")
    return number


def parse_key_cap(text: str, budgets: Sequence[Budget]) -> KeyCap:
    """``--budget NAME=USD`` checked against the configured budgets.

    Raises:
        UsageError: not ``NAME=USD``, no budget of that name, a budget whose
            ``per`` is not ``"key"``, or an amount that is not a number ≥ 0.
    """
    name, sep, amount = text.partition("=")
    name, amount = name.strip(), amount.strip()
    if not sep or not name or not amount:
        raise UsageError(f"--budget: expected NAME=USD (e.g. team=5), got {text!r}")
    found = next((budget for budget in budgets if budget.name == name), None)
    if found is None:
        known = ", ".join(budget.name for budget in budgets) or "none in ledger.toml"
        raise UsageError(f"--budget: no budget named {name!r} (budgets: {known})")
    if found.per != "key":
        raise UsageError(
            f'--budget: budget {name!r} has per = {found.per!r}, not "key": '
            f'a cap per key needs a budget with per = "key"'
        )
    try:
        usd = _toml_number(amount)
        micros = usd_to_micros(usd)
    except ValueError as exc:
        raise UsageError(f"--budget {name}=: {exc}") from exc
    if micros < 0 or micros > _MAX_MICROS:
        raise UsageError(f"--budget {name}=: must be a number ≥ 0")
    return KeyCap(name, usd, micros)
