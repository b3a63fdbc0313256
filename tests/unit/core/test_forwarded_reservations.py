"""A forwarded reservation never lapses: it waits for a record, then is charged."""

import datetime as dt

from ledger.core.spend import apply_usd_event, empty_usd_state, expired_forwarded, unsettled

REF, OTHER = "a" * 64, "b" * 64


def _verdict(usd, ref: str, *, forwarded: bool, ts: str = "2026-06-01T12:00:00.000000Z"):
    reservation = {"micros": 15_003, "expires_at": "2026-06-01T12:15:00.000000Z"}
    if forwarded:
        reservation["forwarded"] = True
    payload = {"provider": "anthropic", "utc_day": "2026-06-01", "reservation": reservation}
    apply_usd_event(usd, "budget.allow", ts, payload, ref)


def _observation(usd, ts: str) -> None:
    payload = {"provider": "anthropic", "fetched_at": ts, "ok": False}
    apply_usd_event(usd, "budget.observation", ts, payload, "c" * 64)


def test_only_the_forwarded_reservation_outlives_its_expiry_and_its_day():
    usd = empty_usd_state()
    _verdict(usd, REF, forwarded=True)
    _verdict(usd, OTHER, forwarded=False)
    _observation(usd, "2026-06-04T00:00:00.000000Z")  # expired, and three days on
    assert list(usd["reservations"]) == [REF]
    assert unsettled(usd) == (1, 15_003)
    later = dt.datetime(2026, 6, 4, tzinfo=dt.UTC)
    assert [ref for ref, _res in expired_forwarded(usd, later)] == [REF]


def test_a_record_settles_it():
    usd = empty_usd_state()
    _verdict(usd, REF, forwarded=True)
    record = {"provider": "anthropic", "actual_micros": 15_003, "verdict_ref": REF,
              "utc_day": "2026-06-01"}  # fmt: skip
    apply_usd_event(usd, "budget.record_call", "2026-06-01T12:20:00.000000Z", record, "d" * 64)
    assert usd["reservations"] == {}
    assert usd["spend"]["2026-06-01"]["anthropic"] == 15_003
    assert unsettled(usd) == (0, 0)
