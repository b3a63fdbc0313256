"""What a gateway key's own figures (``GET /v1/ledger/me``) say to a home-less laptop.

Pure reading of the document the gateway answers: whether the key's session
must stop now (its tightest cap or budget is spent, or a figure is unknown),
and the status line for people. The gateway gates every call itself; the
hooks only stop a session the gateway would refuse, so its next prompt never
starts.
"""

from typing import Any

from ledger.core.ids import printable
from ledger.core.units import cents_text


def _unknown(document: dict[str, Any]) -> str | None:
    """Why a figure that applies to the key is unknown, or ``None``."""
    for cap in document.get("caps") or []:
        if cap.get("cap_micros") is not None and cap.get("used_micros") is None:
            return f"{cap.get('scope')}: {cap.get('uncertainty_reason') or 'counter untrusted'}"
    for budget in document.get("budgets") or []:
        if budget.get("used_micros") is None:
            return f"budget:{budget.get('name')}: counter untrusted"
    return None


def key_halt(document: dict[str, Any], refused: str) -> str | None:
    """Why the key's session stops now, in words with what lifts it; ``None`` when it may go on.

    ``refused`` names what the answer refuses ("tool call refused").
    """
    key = printable(str(document.get("key")))
    unknown = _unknown(document)
    if unknown is not None:
        return (
            f"ledger: the spend of gateway key {key} is unknown at the gateway "
            f"({printable(unknown)}); {refused} (fail-closed) until the gateway's operator "
            "restores it"
        )
    tightest = document.get("tightest")
    if not isinstance(tightest, dict):
        return None
    left = tightest.get("remaining_micros")
    if not isinstance(left, int) or left > 0:
        return None
    resets = tightest.get("resets_at")
    lift = f"it resets at {resets}" if resets else "it resets at the start of the next budget day"
    return (
        f"ledger: {printable(str(tightest.get('scope')))} is spent for gateway key {key}; "
        f"{refused}; {lift}, or the gateway's operator raises it"
    )


def key_status_line(document: dict[str, Any], resets: str | None) -> str:
    """One line for Claude Code's status line: the key's spend today, what is left, the reset.

    ``resets`` is the tightest cap's reset in people's words (a budget's own
    ``resets_at`` is preferred when the tightest is a budget).
    """
    key = printable(str(document.get("key")))
    unknown = _unknown(document)
    if unknown is not None:
        return f"ledger · {key} · spend unknown: {printable(unknown)}"
    parts = ["ledger", key]
    today = (document.get("spend") or {}).get("day") or {}
    if isinstance(today.get("micros"), int):
        parts.append(f"today {cents_text(today['micros'])}")
    tightest = document.get("tightest")
    if not isinstance(tightest, dict) or not isinstance(tightest.get("remaining_micros"), int):
        parts.append("no cap configured")
        return " · ".join(parts)
    left = max(tightest["remaining_micros"], 0)
    parts.append(f"{cents_text(left, round_down=True)} left of {printable(str(tightest['scope']))}")
    if resets:
        parts.append(resets)
    return " · ".join(parts)
