"""Rates read from tables: a price override in the config, a model's rates in the snapshot.

Each rate is exact decimal text or a number, kept as a fraction (see ``ledger.core.prices``).
"""

import re
from fractions import Fraction
from typing import Any

from ledger.core.prices import RATE_KINDS, PriceError, Rates


def parse_rate(value: Any, name: str) -> Fraction:
    """A rate from a number or decimal text: finite and ≥ 0.

    Raises:
        PriceError: not a number, not finite, or negative.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PriceError(f"{name}: must be a number")
    text = str(value).strip()
    if not re.fullmatch(r"\d{1,15}(\.\d{1,30})?([eE][+-]?\d{1,3})?", text):
        raise PriceError(f"{name}: must be a number ≥ 0, got {value!r}")
    return Fraction(text)


def rates_from(
    table: dict[str, Any], prefix: str = "", suffix: str = "", *, extra: bool = False
) -> Rates:
    """Rates from a table of ``<kind><suffix>`` keys; cache rates default as SPEC §7 says.

    ``cache_read`` and ``cache_write`` default to the input rate, and
    ``cache_write_1h`` to ``cache_write``. With ``extra`` (the snapshot),
    every other key of the table is a rate of its own kind, kept in ``extra``.

    Raises:
        PriceError: ``input`` or ``output`` missing, or a malformed rate.
    """

    def rate(kind: str) -> Fraction | None:
        key = f"{kind}{suffix}"
        return parse_rate(table[key], f"{prefix}{key}") if table.get(key) is not None else None

    found = {kind: rate(kind) for kind in RATE_KINDS}
    for kind in ("input", "output"):
        if found[kind] is None:
            raise PriceError(f"{prefix}{kind}{suffix}: required")
    base_input = found["input"]
    assert base_input is not None  # noqa: S101 - checked above
    cache_write = found["cache_write"] if found["cache_write"] is not None else base_input
    return Rates(
        input=base_input,
        output=found["output"] or Fraction(0),
        cache_read=found["cache_read"] if found["cache_read"] is not None else base_input,
        cache_write=cache_write,
        cache_write_1h=found["cache_write_1h"]
        if found["cache_write_1h"] is not None
        else cache_write,
        extra=tuple(
            (str(key), parse_rate(value, f"{prefix}{key}"))
            for key, value in table.items()
            if extra and key not in RATE_KINDS and value is not None
        ),
    )
