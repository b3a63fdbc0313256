"""usd.day_timezone through the commands (SPEC §1, §10): verdict, record, usage, reconcile,
explain, metrics and report count the budget day in the zone; utc_day keeps its meaning."""

import json
from pathlib import Path
from typing import Any

import pytest

from tests.gate_helpers import Observer, state_path

NY = "America/New_York"
BERLIN = "Europe/Berlin"


class Home:
    """Commands against one home at a given UTC time, in one zone."""

    def __init__(self, run, home: Path, zone: str | None = NY, **extra: str) -> None:
        self.run, self.home, self.extra = run, home, extra
        self.zone = zone

    def env(self, when: str) -> dict[str, str]:
        env = {"LEDGER_NOW": when, "LEDGER_BILLING_STALE_HALT_PCT": "100", **self.extra}
        if self.zone is not None:
            env["LEDGER_USD_DAY_TIMEZONE"] = self.zone
        return env

    def __call__(self, when: str, *args: str, code: int | None = 0) -> Any:
        result = self.run(["--home", str(self.home), *args], env=self.env(when))
        if code is not None:
            assert result.code == code, (args, result.stdout, result.stderr)
        return result.json() if result.stdout.startswith("{") else result


def stored_zone(home: Path) -> str:
    """The zone the derived state was folded in (its first line; a MAC follows)."""
    document = json.loads(state_path(home).read_text().splitlines()[0])
    return str(document["data"]["meta"]["day_zone"])


def used(ledger: Home, when: str) -> tuple[str, float]:
    body = ledger(when, "usage")
    return body["budget_day"], body["usd_used"]


@pytest.mark.parametrize(
    ("zone", "day", "first", "last"),
    [
        (NY, "2026-03-08", "2026-03-08T05:00:00Z", "2026-03-09T03:59:59Z"),  # 23 hours
        (NY, "2026-11-01", "2026-11-01T04:00:00Z", "2026-11-02T04:59:59Z"),  # 25 hours
        (BERLIN, "2026-03-29", "2026-03-28T23:00:00Z", "2026-03-29T21:59:59Z"),  # 23 hours
        (BERLIN, "2026-10-25", "2026-10-24T22:00:00Z", "2026-10-25T22:59:59Z"),  # 25 hours
    ],
)
def test_spend_counts_from_the_zones_midnight_to_the_next(home, run_inproc, zone, day, first, last):
    """On a DST day the cap holds for exactly the 23 or 25 hours between the zone's midnights."""
    ledger = Home(run_inproc, home, zone)
    assert ledger(first, "usage")["budget_day"] == day
    ledger(first, "record", "60", "--provider", "openai")
    halted = ledger(last, "verdict", "45", code=1)  # 60 + 45 ≥ 100 at the day's last second
    assert (halted["verdict"], halted["budget_day"]) == ("halt-100", day)
    after = _plus_one_second(last)
    admitted = ledger(after, "verdict", "45")  # the next budget day starts from zero
    assert admitted["verdict"] == "allow"
    assert admitted["budget_day"] > day
    assert admitted["utc_day"] == after[:10]
    assert admitted["usd_used"] == 0


def _plus_one_second(text: str) -> str:
    import datetime as dt

    moment = dt.datetime.fromisoformat(text) + dt.timedelta(seconds=1)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_utc_day_keeps_meaning_the_utc_day(home, run_inproc):
    """22:00 in New York is already the next UTC day: both days are printed and sealed apart."""
    ledger = Home(run_inproc, home)
    verdict = ledger("2026-03-02T03:00:00Z", "verdict", "1")
    assert (verdict["utc_day"], verdict["budget_day"]) == ("2026-03-02", "2026-03-01")
    record = ledger("2026-03-02T03:01:00Z", "record", "2", "--provider", "openai")
    assert (record["utc_day"], record["budget_day"]) == ("2026-03-02", "2026-03-01")
    entries = [json.loads(line) for line in (home / "events.jsonl").read_text().splitlines()]
    assert entries[0]["payload"]["utc_day"] == "2026-03-02"
    assert entries[1]["payload"]["utc_day"] == "2026-03-02"
    assert entries[1]["payload"]["budget_day"] == "2026-03-01"
    assert used(ledger, "2026-03-02T03:02:00Z") == ("2026-03-01", 2)


def test_default_zone_is_utc_and_both_days_agree(home, run_inproc):
    ledger = Home(run_inproc, home, zone=None)
    verdict = ledger("2026-03-02T03:00:00Z", "verdict", "1")
    assert verdict["utc_day"] == verdict["budget_day"] == "2026-03-02"


def test_a_record_settling_a_reservation_counts_on_its_budget_day(home, run_inproc):
    """Admitted at 23:59 New York time, recorded at 00:01: yesterday's spend, not today's."""
    ledger = Home(run_inproc, home)
    ref = ledger("2026-03-10T03:59:00Z", "verdict", "5", "--provider", "openai")["verdict_ref"]
    record = ledger("2026-03-10T04:01:00Z", "record", "4", "--provider", "openai",
                    "--verdict-ref", ref)  # fmt: skip
    assert record["settled"] is True
    assert (record["budget_day"], record["utc_day"]) == ("2026-03-09", "2026-03-10")
    assert used(ledger, "2026-03-10T04:02:00Z") == ("2026-03-10", 0)


def test_a_changed_zone_rebuilds_derived_state_and_counts_in_the_new_day(home, run_inproc):
    """UTC, then New York: spend at 22:00 New York time is today's in the new zone, at once."""
    utc = Home(run_inproc, home, zone=None, LEDGER_USD_DAILY_CAP="5.5")
    utc("2026-03-02T03:00:00Z", "record", "5", "--provider", "openai")
    assert utc("2026-03-02T03:10:00Z", "verdict", "0.4")["verdict"] == "warn-90"
    assert stored_zone(home) == "UTC"
    ny = Home(run_inproc, home, NY, LEDGER_USD_DAILY_CAP="5.5")
    # 03:00Z is 22:00 on 1 March in New York: the 5.00 and the 0.40 reserved count today.
    halted = ny("2026-03-02T03:20:00Z", "verdict", "0.2", code=1)
    assert (halted["verdict"], halted["budget_day"]) == ("halt-100", "2026-03-01")
    assert (halted["usd_used"], halted["usd_reserved"]) == (5, 0.4)
    assert stored_zone(home) == NY
    back = utc("2026-03-02T03:30:00Z", "usage")
    assert (back["budget_day"], back["usd_used"]) == ("2026-03-02", 5)


def test_reconcile_holds_the_budget_days_counter_against_the_bill(home, run_inproc, tmp_path):
    """18:00 New York time is the next UTC day: the counter is the New York day's, so no drift."""
    observer = Observer(tmp_path / "observer", home)
    ledger = Home(run_inproc, home, **observer.env)
    ledger("2026-03-01T23:00:00Z", "record", "5", "--provider", "openai")
    observer.answer(5, "2026-03-02T00:59:00Z")
    result = ledger("2026-03-02T01:00:00Z", "reconcile")
    assert result["status"] == "ok"
    entry = json.loads((home / "events.jsonl").read_text().splitlines()[-1])
    assert entry["payload"]["counter_micros"] == 5_000_000
    assert entry["payload"]["utc_day"] == "2026-03-02"


def test_explain_reproduces_a_verdict_on_its_budget_day(home, run_inproc):
    ledger = Home(run_inproc, home)
    ledger("2026-03-02T03:00:00Z", "record", "5", "--provider", "openai")
    ref = ledger("2026-03-02T04:00:00Z", "verdict", "1")["verdict_ref"]
    doc = ledger("2026-03-02T04:05:00Z", "explain", ref, "--json")
    assert doc["reproducible"] is True
    assert (doc["budget_day"], doc["utc_day"]) == ("2026-03-01", "2026-03-02")
    assert doc["caps"][0]["used_micros"] == 5_000_000


def test_metrics_count_the_verdicts_of_the_budget_day(home, run_inproc):
    pytest.importorskip("prometheus_client")
    ledger = Home(run_inproc, home)
    ledger("2026-03-02T03:00:00Z", "verdict", "1")  # 22:00 on 1 March in New York
    ledger("2026-03-02T06:00:00Z", "verdict", "1")  # 01:00 on 2 March
    ledger("2026-03-03T04:30:00Z", "verdict", "1")  # 23:30 on 2 March, the next UTC day
    text = ledger("2026-03-03T04:40:00Z", "metrics").stdout
    assert 'ledger_verdicts_today{outcome="allow",reason=""} 2.0' in text


def test_report_covers_the_23_hour_day(home, run_inproc):
    ledger = Home(run_inproc, home)
    ledger("2026-03-08T04:59:00Z", "record", "1", "--provider", "openai")  # 7 March
    ledger("2026-03-08T05:00:00Z", "record", "2", "--provider", "openai")
    ledger("2026-03-09T03:59:00Z", "record", "3", "--provider", "openai")
    ledger("2026-03-09T04:00:00Z", "record", "4", "--provider", "openai")  # 9 March
    doc = ledger("2026-03-09T05:00:00Z", "report", "--day", "2026-03-08", "--json")
    assert doc["timezone"] == NY
    assert (doc["day_start"], doc["day_end"]) == (
        "2026-03-08T05:00:00.000000Z",
        "2026-03-09T04:00:00.000000Z",
    )
    aggregate = doc["scopes"][0]
    assert aggregate["counter_micros"] == 5_000_000
    assert aggregate["series"][-1] == ["2026-03-09T03:59:00.000000Z", 5_000_000]


@pytest.mark.parametrize(
    ("where", "key"), [("env", "LEDGER_USD_DAY_TIMEZONE"), ("file", "usd.day_timezone")]
)
def test_an_unknown_zone_is_a_config_error_naming_the_key(home, run_inproc, where, key):
    env = {"LEDGER_NOW": "2026-03-02T03:00:00Z"}
    if where == "env":
        env["LEDGER_USD_DAY_TIMEZONE"] = "Mars/Olympus"
    else:
        path = home / "ledger.toml"
        path.write_text(
            path.read_text().replace("[usd]\n", '[usd]\nday_timezone = "Mars/Olympus"\n')
        )
    for args in (["verdict", "1"], ["usage"], ["report"]):
        result = run_inproc(["--home", str(home), *args], env=env)
        assert result.code == 78, (args, result.stdout, result.stderr)
        assert result.stderr.startswith(f"ledger: {key}: ")
        assert result.stderr.count("\n") == 1


def test_spooled_spend_counts_on_the_budget_day_too():
    """A fleet host's spooled record (SPEC §8) folds into the zone's day like a sealed one."""
    import datetime as dt
    from types import SimpleNamespace
    from zoneinfo import ZoneInfo

    from ledger.core.config import Config
    from ledger.core.spend import scope_state
    from ledger.core.state import empty_state
    from ledger.services.gate.spool import with_spooled

    waiting = [
        {
            "key": "k1",
            "spooled_at": "2026-03-02T03:00:00.000000Z",  # 22:00 on 1 March in New York
            "request": {"provider": "openai", "actual_micros": 3_000_000, "verdict_ref": None},
        }
    ]
    spool = SimpleNamespace(pending=lambda: True, entries=lambda: waiting)
    zone = ZoneInfo(NY)
    deps = SimpleNamespace(spool=spool, config=Config(day_timezone=NY, day_zone=zone))
    now = dt.datetime(2026, 3, 2, 3, 5, tzinfo=dt.UTC)
    usd = with_spooled(deps, empty_state(), now)
    assert scope_state(usd, None, 100, "2026-03-01", now, zone).local_micros == 3_000_000
    assert scope_state(usd, None, 100, "2026-03-02", now, zone).local_micros == 0
