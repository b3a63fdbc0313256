"""Parsed forms of small files, remembered by their exact bytes.

A long-lived process (``ledger serve``) answers thousands of requests that each
read ``ledger.toml``, the trust store and the writer key. Reading those files
again is cheap; parsing TOML, checking a trust store's signatures and loading
an Ed25519 key are not. Keying the parsed form by the file's whole content,
rather than by its inode or mtime, means a changed file can never be served
from a stale entry, whatever its timestamps say: a request sees exactly what
it would see in a fresh process (SPEC §9).

Values kept here must be immutable, or never changed by their users.
"""

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")
_KEPT = 16  # per kind: a home's config, trust store and a key or two, with room to spare

_MEMOS: dict[str, "OrderedDict[Hashable, object]"] = {}


def remembered(kind: str, key: Hashable, build: Callable[[], T]) -> T:
    """``build()``, or what it returned before for the same ``kind`` and ``key``.

    A ``build`` that raises is not remembered: the next call tries again and
    raises the same error, as a fresh process would.
    """
    memo = _MEMOS.setdefault(kind, OrderedDict())
    try:
        value = memo[key]
    except KeyError:
        value = build()
        memo[key] = value
        if len(memo) > _KEPT:
            memo.popitem(last=False)
    else:
        memo.move_to_end(key)
    return value  # type: ignore[return-value]
