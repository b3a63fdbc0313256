"""Budgets as the per-call commands and the views show them.

The checks of a call's budget scope (``--tag``, ``--key``) and the figures a
verdict, ``ledger budgets``, ``usage --budget`` and ``status`` print.
"""

import re
from typing import Any

from ledger.core.timefmt import format_ts
from ledger.core.units import micros_to_usd
from ledger.core.verdict import usage_pct
from ledger.errors import UsageError

TAG_RE = re.compile(r"^[A-Za-z0-9._:/@+-]{1,64}$")
TAGS_MAX = 32
KEY_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


def usd(micros: int | None) -> float | None:
    """Micro-USD as USD for the JSON document (display only)."""
    return None if micros is None else micros_to_usd(micros)


def tag_list(values: object) -> tuple[str, ...]:
    """Checked ``--tag`` values, in order, each once.

    Raises:
        UsageError: a tag that does not match ``^[A-Za-z0-9._:/@+-]{1,64}$``, or
            more than 32 of them.
    """
    if values is None:
        return ()
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise UsageError("--tag: give a list of tags")
    for value in values:
        if not isinstance(value, str) or not TAG_RE.fullmatch(value):
            raise UsageError(f"--tag: {value!r} must match ^[A-Za-z0-9._:/@+-]{{1,64}}$")
    unique = tuple(dict.fromkeys(values))
    if len(unique) > TAGS_MAX:
        raise UsageError(f"--tag: at most {TAGS_MAX} tags")
    return unique


def key_name(value: object) -> str | None:
    """A checked gateway key name (``--key``).

    Raises:
        UsageError: not a name matching ``^[a-z][a-z0-9_-]{0,63}$``.
    """
    if value is not None and (not isinstance(value, str) or not KEY_NAME_RE.fullmatch(value)):
        raise UsageError("--key: must be a key name matching ^[a-z][a-z0-9_-]{0,63}$")
    return value


def budgets_document(checks: Any, estimate_micros: int) -> list[dict[str, Any]]:
    """Each applicable budget's figures as the verdict prints them (USD, projected %)."""
    shown = []
    for check in checks:
        figures, scope = check.figures, check.scope
        projected = usage_pct(scope, estimate_micros)
        entry: dict[str, Any] = {
            "name": figures.found.budget.name,
            "period": figures.found.budget.period,
            "period_start": format_ts(figures.period_start),
            "period_end": format_ts(figures.period_end),
            "used": usd(scope.used_micros),
            "reserved": usd(scope.reserved_micros),
            "cap": usd(scope.cap_micros),
            "usage_pct": None if projected is None else round(float(projected), 4),
        }
        if figures.found.budget.per is not None:
            entry["per_value"] = figures.found.per_value
        shown.append(entry)
    return shown
