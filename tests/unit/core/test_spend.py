"""The USD fold: reservations, settlement, day rollover, readings, re-basing."""

import datetime as dt

from ledger.core.spend import apply_usd_event, empty_usd_state, scope_state
from ledger.core.state import apply_entry, empty_state

DAY = "2026-11-22"
NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


def ts(hour: int, day: int = 22) -> str:
    return f"2026-11-{day:02d}T{hour:02d}:00:00.000000Z"


def verdict(usd, ref, micros, provider=None, expires=ts(13), day=DAY, at=ts(11)):
    apply_usd_event(
        usd,
        "budget.allow",
        at,
        {
            "provider": provider,
            "utc_day": day,
            "reservation": {"micros": micros, "expires_at": expires},
        },
        ref,
    )


def record(usd, micros, provider="openai", ref=None, day=DAY, at=ts(11)):
    apply_usd_event(
        usd,
        "budget.record_call",
        at,
        {"provider": provider, "actual_micros": micros, "utc_day": day, "verdict_ref": ref},
        "h",
    )


class TestReservations:
    def test_admitted_verdict_reserves_and_record_settles(self):
        """A reservation counts until its call is recorded."""
        usd = empty_usd_state()
        verdict(usd, "r1", 5)
        assert scope_state(usd, None, 100, DAY, NOW).reserved_micros == 5
        record(usd, 4, ref="r1")
        view = scope_state(usd, None, 100, DAY, NOW)
        assert (view.reserved_micros, view.local_micros) == (0, 4)

    def test_expired_reservation_stops_counting(self):
        """After reservation_ttl_seconds the reservation no longer counts."""
        usd = empty_usd_state()
        verdict(usd, "r1", 5, expires=ts(12))
        assert scope_state(usd, None, 100, DAY, NOW).reserved_micros == 0
        assert scope_state(usd, None, 100, DAY, NOW - dt.timedelta(seconds=1)).reserved_micros == 5

    def test_provider_reservation_counts_in_both_scopes(self):
        """A provider's reservation counts for the provider and the aggregate."""
        usd = empty_usd_state()
        verdict(usd, "r1", 5, provider="openai")
        verdict(usd, "r2", 7)
        assert scope_state(usd, "openai", 100, DAY, NOW).reserved_micros == 5
        assert scope_state(usd, None, 100, DAY, NOW).reserved_micros == 12


class TestDays:
    def test_yesterday_does_not_count_today(self):
        """A new UTC day starts from zero without any reset job."""
        usd = empty_usd_state()
        record(usd, 9, day="2026-11-21", at=ts(23, 21))
        verdict(usd, "r", 3, day="2026-11-21", at=ts(23, 21), expires=ts(1))
        view = scope_state(usd, None, 100, DAY, NOW.replace(hour=0, minute=5))
        assert (view.local_micros, view.reserved_micros) == (0, 0)

    def test_old_days_are_pruned(self):
        """Only today and yesterday are kept, so state stays small."""
        usd = empty_usd_state()
        record(usd, 1, day="2026-11-19", at=ts(10, 19))
        record(usd, 1, day=DAY, at=ts(10))
        assert set(usd["spend"]) == {DAY}


class TestReadings:
    def test_newest_successful_reading_wins(self):
        """An older reading never replaces a newer one; failures do not replace readings."""
        usd = empty_usd_state()
        good = {"provider": "aggregate", "ok": True, "usd_used_micros": 7, "billing_ts": ts(11),
                "server_ts": None, "fetched_at": ts(11)}  # fmt: skip
        apply_usd_event(usd, "budget.observation", ts(11), good, "a")
        older = {**good, "usd_used_micros": 3, "fetched_at": ts(10)}
        apply_usd_event(usd, "budget.observation", ts(11), older, "b")
        failed = {"provider": "aggregate", "ok": False, "usd_used_micros": None, "billing_ts": None,
                  "server_ts": None, "fetched_at": ts(12), "reason": "down"}  # fmt: skip
        apply_usd_event(usd, "budget.observation", ts(12), failed, "c")
        view = scope_state(usd, None, 100, DAY, NOW)
        assert view.billing_micros == 7
        assert usd["attempts"]["aggregate"] == ts(12)

    def test_forced_reconcile_rebases_the_counter(self):
        """--force-reason moves the counter to the billing figure."""
        usd = empty_usd_state()
        record(usd, 10)
        apply_usd_event(
            usd, "budget.reconcile", ts(11),
            {"provider": "aggregate", "utc_day": DAY, "counter_micros": 10, "billing_micros": 4,
             "drift_pct": "60.0000", "blocking": False, "forced": True, "reading": None},
            "x",
        )  # fmt: skip
        assert scope_state(usd, None, 100, DAY, NOW).local_micros == 4
        assert usd["reconciles"]["aggregate"]["blocking"] is False


class TestMeta:
    def test_backwards_timestamp_is_measured(self):
        """The largest step back between consecutive entries is recorded."""
        state = empty_state()
        apply_entry(state, "budget.record_call", ts(12), {"provider": "x", "actual_micros": 1,
                                                          "utc_day": DAY, "verdict_ref": None}, "a")  # fmt: skip
        apply_entry(state, "budget.record_call", ts(11), {"provider": "x", "actual_micros": 1,
                                                          "utc_day": DAY, "verdict_ref": None}, "b")  # fmt: skip
        assert state["meta"]["max_backstep_us"] == 3600 * 1_000_000

    def test_negative_amount_is_flagged_and_cleared_by_rebuild(self):
        """A negative amount makes the counter untrustworthy until an operator rebuilds."""
        state = empty_state()
        apply_entry(state, "budget.record_call", ts(12), {"provider": "x", "actual_micros": -1,
                                                          "utc_day": DAY, "verdict_ref": None}, "a")  # fmt: skip
        assert state["meta"]["negative"]
        apply_entry(state, "ledger.state_rebuilt", ts(13), {}, "b")
        assert state["meta"]["negative"] is None


class TestPruning:
    def test_expired_reservations_are_dropped_as_the_chain_moves_on(self):
        """Unrecorded calls do not make the state grow past their reservations' expiry."""
        usd = empty_usd_state()
        for hour in range(1, 11):
            verdict(usd, f"r{hour}", 1, expires=ts(hour + 1), at=ts(hour))
        # Each new verdict drops the reservations that expired at or before it.
        assert set(usd["reservations"]) == {"r10"}
