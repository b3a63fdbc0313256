"""Entry refs for people: how short a printed ref may be and still name one entry.

A ``verdict_ref`` is 64 hex digits (the SHA-256 of an entry's canonical bytes).
Messages print its first ``SHORT_REF_DIGITS``; ``ledger explain`` accepts any
prefix of ``MIN_REF_PREFIX`` or more digits that names one entry, so every ref a
message prints can be pasted back.
"""

import re

FULL_REF_DIGITS = 64
MIN_REF_PREFIX = 12
SHORT_REF_DIGITS = 16
REF_PREFIX_RE = re.compile(rf"[0-9a-f]{{{MIN_REF_PREFIX},{FULL_REF_DIGITS}}}")


def short_ref(ref: str) -> str:
    """The first ``SHORT_REF_DIGITS`` hex digits of ``ref``: what messages print."""
    return ref[:SHORT_REF_DIGITS]
