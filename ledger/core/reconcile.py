"""Reconciliation arithmetic (SPEC §5): drift between the local counter and the bill."""

from fractions import Fraction


def drift_pct(counter_micros: int, billing_micros: int) -> Fraction:
    """``100·|counter − billing| / max(counter, billing)``, and 0 when both are 0."""
    larger = max(counter_micros, billing_micros)
    if larger == 0:
        return Fraction(0)
    return Fraction(100 * abs(counter_micros - billing_micros), larger)


def pct_text(value: Fraction) -> str:
    """A percentage as a fixed 4-decimal string (payloads hold no floats)."""
    return f"{float(value):.4f}"
