"""The one producer of canonical bytes (RFC 8785, JSON Canonicalization Scheme).

Money is integer micro-USD everywhere, so the float edge cases of RFC 8785 §3.2.2.3
never arise in our own payloads; ``canonical_bytes`` still refuses floats so a
float can never slip into a sealed entry by accident.
"""

import hashlib
import json
from typing import Any

from ledger.errors import CanonicalizationError

_MAX_SAFE = 2**53 - 1
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _reject_floats(value: Any, path: str) -> None:
    if isinstance(value, float):
        raise CanonicalizationError(f"{path}: floats are not allowed, use integers")
    if isinstance(value, dict):
        for key, item in value.items():
            _reject_floats(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _reject_floats(item, f"{path}[{index}]")


def _plain(value: Any) -> bool:
    """Whether ``json.dumps`` can match RFC 8785 for ``value``.

    True for str-keyed objects, lists, strings, safe integers, booleans and null.
    Exact types only (a subclass takes the full scheme): every sealed payload
    passes here, so it is written for speed: the scalars inside an object or a
    list, most of a payload, are checked in its loop rather than by a call each.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_MAX_SAFE <= value <= _MAX_SAFE)
    if kind is dict:
        for key in value:
            if type(key) is not str:
                return False
        items = value.values()
    elif kind is list:
        items = value
    else:
        return False
    for item in items:
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if -_MAX_SAFE <= item <= _MAX_SAFE:
                continue
            return False
        if not _plain(item):
            return False
    return True


def canonical_bytes(value: Any, *, allow_floats: bool = False) -> bytes:
    """Serialize ``value`` per RFC 8785.

    Args:
        value: JSON-compatible data.
        allow_floats: accept floats (only for re-canonicalizing entries written by
            other implementations, whose numbers we must hash as they are).

    Raises:
        CanonicalizationError: a float (unless allowed), an integer outside the
            IEEE-754 exact range, or a non-JSON type.
    """
    if _plain(value):
        # For ASCII output without floats, sorted keys and compact separators are
        # exactly RFC 8785 (key order by UTF-16 units equals code-point order on
        # ASCII; strings escape alike); anything else goes through rfc8785.
        text = _ENCODER.encode(value)
        if text.isascii():
            return text.encode("ascii")
    elif not allow_floats:
        _reject_floats(value, "$")
    import rfc8785  # only non-ASCII or float-bearing values need the full scheme

    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise CanonicalizationError(f"cannot canonicalize: {exc}") from exc


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256, the form ``prev_hash`` uses."""
    return hashlib.sha256(data).hexdigest()
