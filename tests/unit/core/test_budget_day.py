"""Budget days in a zone (SPEC §10): midnight to midnight, 23- and 25-hour days included."""

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from ledger.core.config import from_mapping
from ledger.core.spend import apply_usd_event, empty_usd_state, scope_state
from ledger.core.timefmt import budget_day, day_bounds
from ledger.errors import ConfigError

UTC = dt.UTC


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "day", "start", "end", "hours"),
    [
        ("America/New_York", "2026-03-08", "2026-03-08T05:00", "2026-03-09T04:00", 23),
        ("America/New_York", "2026-11-01", "2026-11-01T04:00", "2026-11-02T05:00", 25),
        ("Europe/Berlin", "2026-03-29", "2026-03-28T23:00", "2026-03-29T22:00", 23),
        ("Europe/Berlin", "2026-10-25", "2026-10-24T22:00", "2026-10-25T23:00", 25),
        ("America/New_York", "2026-03-09", "2026-03-09T04:00", "2026-03-10T04:00", 24),
        ("UTC", "2026-03-08", "2026-03-08T00:00", "2026-03-09T00:00", 24),
    ],
)
def test_a_day_runs_midnight_to_midnight_in_its_zone(zone, day, start, end, hours):
    """DST days last 23 or 25 hours; every moment inside belongs to the day, none outside."""
    tz = UTC if zone == "UTC" else ZoneInfo(zone)
    first, after = day_bounds(day, tz)
    assert (first, after) == (at(start), at(end))
    assert after - first == dt.timedelta(hours=hours)
    assert budget_day(first, tz) == day
    assert budget_day(after - dt.timedelta(microseconds=1), tz) == day
    assert budget_day(first - dt.timedelta(microseconds=1), tz) < day
    assert budget_day(after, tz) > day


def ts(text: str) -> str:
    return f"{text}:00.000000Z"


def test_the_fold_keys_spend_by_the_budget_day_of_each_entry():
    """Spend at 23:30 New York time on a 25-hour day counts on that day, not the UTC one."""
    zone = ZoneInfo("America/New_York")
    usd = empty_usd_state()
    record = {"provider": "openai", "utc_day": "2026-11-02", "verdict_ref": None}
    apply_usd_event(usd, "budget.record_call", ts("2026-11-02T04:30"),
                    {**record, "actual_micros": 7}, "a", zone)  # fmt: skip
    apply_usd_event(usd, "budget.record_call", ts("2026-11-02T05:00"),
                    {**record, "actual_micros": 2}, "b", zone)  # fmt: skip
    now = at("2026-11-02T05:01")
    assert scope_state(usd, None, 100, "2026-11-01", now, zone).local_micros == 7
    assert scope_state(usd, None, 100, "2026-11-02", now, zone).local_micros == 2


def test_a_settled_record_counts_on_its_reservations_budget_day():
    """SPEC §4 in a zone: admitted at 23:59 Berlin time, recorded at 00:01, counts the day before."""
    zone = ZoneInfo("Europe/Berlin")
    usd = empty_usd_state()
    verdict = {"provider": None, "utc_day": "2026-03-02",
               "reservation": {"micros": 5, "expires_at": ts("2026-03-02T23:15")}}  # fmt: skip
    apply_usd_event(usd, "budget.allow", ts("2026-03-02T22:59"), verdict, "v", zone)
    record = {"provider": "openai", "actual_micros": 4, "utc_day": "2026-03-02", "verdict_ref": "v"}
    apply_usd_event(usd, "budget.record_call", ts("2026-03-02T23:01"), record, "r", zone)
    now = at("2026-03-02T23:02")
    assert scope_state(usd, None, 100, "2026-03-02", now, zone).local_micros == 4
    assert scope_state(usd, None, 100, "2026-03-03", now, zone).local_micros == 0


def test_a_reading_counts_for_the_budget_day_it_was_fetched_on():
    zone = ZoneInfo("Asia/Tokyo")
    usd = empty_usd_state()
    reading = {"provider": "aggregate", "ok": True, "usd_used_micros": 9,
               "billing_ts": ts("2026-03-02T15:30"), "server_ts": None,
               "fetched_at": ts("2026-03-02T15:30")}  # fmt: skip
    apply_usd_event(usd, "budget.observation", ts("2026-03-02T15:30"), reading, "o", zone)
    now = at("2026-03-02T15:31")  # 00:31 on 3 March in Tokyo
    assert scope_state(usd, None, 100, "2026-03-03", now, zone).billing_micros == 9
    assert scope_state(usd, None, 100, "2026-03-02", now, zone).billing_micros is None


class TestConfig:
    def test_default_is_utc(self):
        config = from_mapping({}, {})
        assert (config.day_timezone, config.day_zone) == ("UTC", dt.UTC)

    def test_a_zone_is_looked_up_by_the_given_database(self):
        config = from_mapping({"usd": {"day_timezone": "Europe/Berlin"}}, {}, ZoneInfo)
        assert config.day_zone == ZoneInfo("Europe/Berlin")

    @pytest.mark.parametrize("bad", ["Mars/Olympus", "../../etc/passwd", "", 5, "Europe/"])
    def test_a_bad_name_is_an_error_naming_the_key(self, bad):
        def lookup(name: str) -> dt.tzinfo:
            return ZoneInfo(name)

        with pytest.raises(ConfigError, match=r"^usd\.day_timezone: "):
            from_mapping({"usd": {"day_timezone": bad}}, {}, lookup)
        if isinstance(bad, str):
            with pytest.raises(ConfigError, match=r"^LEDGER_USD_DAY_TIMEZONE: "):
                from_mapping({}, {"LEDGER_USD_DAY_TIMEZONE": bad}, lookup)
