"""The one-sentence halt message the SDK guards raise and the gateway answers with."""

import ledger
from ledger.core.halt_text import halt_message, usd_text


class TestUsdText:
    def test_cents_or_more_digits_when_cents_would_hide_the_amount(self):
        """$4.90 and $0.05 in cents; $0.0156 and $0.001234 keep their digits."""
        assert [usd_text(m) for m in (4_900_000, 50_000, 0, 15_600, 1_234)] == [
            "$4.90", "$0.05", "$0.00", "$0.0156", "$0.001234",
        ]  # fmt: skip


class TestHaltMessage:
    def test_gives_verdict_cap_used_reserved_and_estimate(self):
        """Every figure a user needs to see why the call was not sent."""
        document = {
            "verdict": "halt-100", "deciding_cap": "provider:anthropic",
            "usd_used_micros": 4_900_000, "usd_reserved_micros": 50_000,
            "daily_cap_micros": 5_000_000, "estimated_micros": 120_000, "usage_pct": 101.4,
        }  # fmt: skip
        assert halt_message(document) == (
            "halt-100 (projected 101.4 % of the cap): the deciding cap provider:anthropic of $5.00 has $4.90 used and $0.05 "
            "reserved, and this call's estimate is $0.12"
        )

    def test_an_untrusted_counter_shows_its_figures_as_unknown_never_zero(self):
        """A torn or broken chain: what was used is not known, so no $0.00 is shown."""
        document = {
            "verdict": "halt-uncertainty", "uncertainty_reason": "counter_inconsistent",
            "diagnostic": "events.jsonl ends in a torn line", "deciding_cap": "aggregate",
            "usd_used_micros": 0, "usd_reserved_micros": 0,
            "daily_cap_micros": 100_000_000, "estimated_micros": 500_000,
        }  # fmt: skip
        assert halt_message(document) == (
            "halt-uncertainty (counter_inconsistent): the deciding cap aggregate of $100.00 has "
            "unknown used and unknown reserved, and this call's estimate is $0.50 — "
            "events.jsonl ends in a torn line"
        )

    def test_uncertainty_names_its_reason_and_diagnostic(self):
        """A halt-uncertainty says why the counter is not trusted."""
        document = {
            "verdict": "halt-uncertainty", "uncertainty_reason": "billing_stale",
            "diagnostic": "no billing reading", "deciding_cap": "aggregate",
            "usd_used_micros": 80_000_000, "usd_reserved_micros": 0,
            "daily_cap_micros": 100_000_000, "estimated_micros": 500_000,
        }  # fmt: skip
        assert halt_message(document) == (
            "halt-uncertainty (billing_stale): the deciding cap aggregate of $100.00 has $80.00 "
            "used and $0.00 reserved, and this call's estimate is $0.50 — no billing reading"
        )

    def test_budget_halted_carries_the_message_and_the_verdict(self):
        """``BudgetHalted`` is exported lazily from ``ledger`` and keeps the verdict."""
        halted = ledger.BudgetHalted({"verdict": "halt-100"})
        assert str(halted).startswith("halt-100 (the cap is 0): the deciding cap unknown")
        assert halted.verdict == {"verdict": "halt-100"}
        assert issubclass(ledger.BudgetWarning, UserWarning)
