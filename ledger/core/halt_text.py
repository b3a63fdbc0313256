"""A halted verdict in one sentence: what the SDK guards raise and the gateway answers with.

The sentence names the verdict, its reason, the deciding cap and its figures
(used, reserved, cap) and the call's estimate, so a caller sees why nothing
was sent without running ``ledger explain``.
"""

from typing import Any

from ledger.core.verdict_kind import Verdict


def usd_text(micros: int) -> str:
    """Micro-USD for people: whole cents, or more digits when the cents would hide the amount."""
    whole, fraction = divmod(abs(micros), 1_000_000)
    digits = f"{fraction:06d}".rstrip("0").ljust(2, "0")
    return f"{'-' if micros < 0 else ''}${whole}.{digits}"


def halt_message(verdict: Any) -> str:
    """One sentence on a halt: verdict, reason, deciding cap, used, reserved, cap, estimate.

    ``verdict`` is the ``ledger verdict`` document (a mapping) or an object with
    its fields as attributes (the Python API's ``Verdict``, whose ``kind`` is
    the verdict already read). The verdict's text is shown as given.
    """

    def field(name: str) -> Any:
        if isinstance(verdict, dict):
            return verdict.get(name)
        return getattr(verdict, name, None)

    # A counter that cannot be trusted has no figures to show: unknown, never $0.00.
    untrusted = field("uncertainty_reason") == "counter_inconsistent"

    def money(name: str, *, spent: bool = True) -> str:
        micros = field(name)
        if not isinstance(micros, int) or (spent and untrusted):
            return "unknown"
        return usd_text(micros)

    what = field("verdict") or "halt"
    kind = field("kind")
    if not isinstance(kind, Verdict):
        kind = Verdict.read(field("verdict"))
    reason = field("uncertainty_reason")
    if reason is None and kind is Verdict.HALT_100:
        projected = field("usage_pct")
        reason = "the cap is 0" if projected is None else f"projected {projected} % of the cap"
    text = f"{what}" + (f" ({reason})" if reason else "")
    text += (
        f": the deciding cap {field('deciding_cap') or 'unknown'} of "
        f"{money('daily_cap_micros', spent=False)} "
        f"has {money('usd_used_micros')} used and {money('usd_reserved_micros')} reserved, "
        f"and this call's estimate is {money('estimated_micros', spent=False)}"
    )
    diagnostic = field("diagnostic")
    if diagnostic:
        text += f" — {diagnostic}"
    return text
