"""The per-call arguments, checked where they enter: amounts, ids, free text, counts.

The command line passes text, the product's own callers typed values
(``Micros``); both get the same checks and the same one-line errors.
"""

import re

from ledger.core.units import usd_to_micros
from ledger.errors import UsageError

PROVIDER_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
REF_RE = re.compile(r"^[0-9a-f]{64}$")
IDEMPOTENCY_KEY_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
TEXT_MAX = 256
# RFC 8785 numbers are IEEE-754 doubles: integers beyond 2^53 - 1 cannot be sealed.
MAX_MICROS = 2**53 - 1


class Micros(int):
    """An amount already in integer micro-USD, for callers inside the product.

    ``amount`` takes it as it is: the gateway and the hooks hold micro-USD, and
    turning them into text only to parse them back would cost time and could
    only lose precision.
    """

    __slots__ = ()


def amount(value: object, what: str) -> int:
    """A USD amount as micro-USD: a decimal, not negative, within the chain's range.

    A ``Micros`` is taken as it is (range still checked).

    Raises:
        UsageError: not a number, negative, or too large.
    """
    if isinstance(value, Micros):
        if value < 0:
            raise UsageError(f"{what}: negative amount")
        if value > MAX_MICROS:
            raise UsageError(f"{what}: amount too large")
        return int(value)
    text = str(value)
    try:
        micros = usd_to_micros(text)
    except ValueError as exc:
        raise UsageError(f"{what}: {exc}") from exc
    if micros < 0 or text.strip().startswith("-"):
        raise UsageError(f"{what}: negative amount {text}")
    if micros > MAX_MICROS:
        raise UsageError(f"{what}: amount too large: {text}")
    return micros


def provider_id(value: object, *, required: bool = False) -> str | None:
    """A checked provider id (``None`` when not given and not required).

    Raises:
        UsageError: missing when required, or not a provider id.
    """
    if value is None:
        if required:
            raise UsageError("--provider is required")
        return None
    if not isinstance(value, str) or not PROVIDER_RE.fullmatch(value):
        raise UsageError(f"--provider: {value!r} is not a provider id (^[a-z][a-z0-9_-]{{0,63}}$)")
    return value


def text_arg(value: object, what: str) -> str | None:
    """Free text the chain stores: at most 256 characters of UTF-8.

    Raises:
        UsageError: too long, or not valid UTF-8.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise UsageError(f"{what}: must be text")
    if len(value) > TEXT_MAX:
        raise UsageError(f"{what}: longer than {TEXT_MAX} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        # argv bytes that are not UTF-8 arrive as lone surrogates: the chain holds UTF-8 only.
        raise UsageError(f"{what}: not valid UTF-8 text") from exc
    return value


def idempotency_key(value: object) -> str | None:
    """A checked idempotency key (SPEC §3).

    Raises:
        UsageError: the key does not match ``^[A-Za-z0-9._:-]{1,128}$``.
    """
    if value is not None and (
        not isinstance(value, str) or not IDEMPOTENCY_KEY_RE.fullmatch(value)
    ):
        raise UsageError("--idempotency-key: must match ^[A-Za-z0-9._:-]{1,128}$")
    return value


def count(value: object, what: str) -> int | None:
    """A token count: an integer ≥ 0 within the chain's range.

    Raises:
        UsageError: negative, not an integer, or too large.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{what}: must be an integer")
    if value < 0:
        raise UsageError(f"{what}: must be ≥ 0")
    if value > MAX_MICROS:
        raise UsageError(f"{what}: larger than the chain can hold (2^53 - 1)")
    return value
