"""Budgets as operators write them: parsing, scope matching, periods and windows."""

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from ledger.core.budget_calendar import period_bounds, period_key
from ledger.core.budgets import (
    Budget,
    CallScope,
    applicable,
    fingerprint,
    parse_budgets,
)
from ledger.core.config import from_mapping
from ledger.errors import ConfigError

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")

FIVE = [
    {"name": "per-session", "usd": 5, "period": "day", "per": "session"},
    {"name": "research", "usd": 200, "period": "month", "match": {"agent": "research-*"}},
    {"name": "opus", "usd": 50, "period": "week", "match": {"model": "claude-opus-*"}},
    {"name": "burst", "usd": 20, "period": "rolling:5h"},
    {"name": "ci-key", "usd": 10, "period": "day", "match": {"key": "ci"}},
]


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def one(**table: object) -> Budget:
    return parse_budgets([{"name": "b", "usd": 1, "period": "day", **table}], "budgets")[0]


class TestParsing:
    def test_the_five_examples_parse(self):
        """The five budgets of the documentation are valid as written."""
        budgets = parse_budgets(FIVE, "budgets")
        assert [b.name for b in budgets] == ["per-session", "research", "opus", "burst", "ci-key"]
        assert budgets[0].per == "session"
        assert budgets[3].window_seconds == 5 * 3600
        assert budgets[1].cap_micros == 200_000_000

    def test_ledger_toml_and_the_environment_both_define_budgets(self):
        """``[[budgets]]`` in the file; ``LEDGER_BUDGETS`` (JSON) replaces them."""
        config = from_mapping({"budgets": FIVE[:1]}, {})
        assert [b.name for b in config.budgets] == ["per-session"]
        config = from_mapping({"budgets": FIVE[:1]}, {"LEDGER_BUDGETS": '[{"name": "x", '
                              '"usd": 1, "period": "rolling:2d"}]'})  # fmt: skip
        assert [b.name for b in config.budgets] == ["x"]
        assert config.budgets[0].window_seconds == 2 * 86_400

    @pytest.mark.parametrize(
        ("table", "named"),
        [
            ({"name": "Bad", "usd": 1, "period": "day"}, 'budgets "Bad".name'),
            ({"usd": 1, "period": "day"}, "budgets[1].name"),
            ({"name": 7, "usd": 1, "period": "day"}, "budgets[1].name"),
            ({"name": "b", "period": "day"}, 'budgets "b".usd'),
            ({"name": "b", "usd": -1, "period": "day"}, 'budgets "b".usd'),
            ({"name": "b", "usd": "lots", "period": "day"}, 'budgets "b".usd'),
            ({"name": "b", "usd": 1, "period": "year"}, 'budgets "b".period'),
            ({"name": "b", "usd": 1, "period": "rolling:0h"}, 'budgets "b".period'),
            ({"name": "b", "usd": 1, "period": "rolling:5m"}, 'budgets "b".period'),
            ({"name": "b", "usd": 1, "period": "rolling:400d"}, 'budgets "b".period'),
            ({"name": "b", "usd": 1, "period": "day", "per": "model"}, 'budgets "b".per'),
            ({"name": "b", "usd": 1, "period": "day", "match": {"user": "x"}}, '"b".match.user'),
            ({"name": "b", "usd": 1, "period": "day", "match": {"agent": 3}}, '"b".match.agent'),
            ({"name": "b", "usd": 1, "period": "day", "match": "x"}, 'budgets "b".match'),
            ({"name": "b", "usd": 1, "period": "day", "warn_pct": 101}, 'budgets "b".warn_pct'),
            ({"name": "b", "usd": 1, "period": "day", "cap": 1}, 'budgets "b".cap'),
        ],
    )
    def test_a_malformed_budget_is_a_config_error_naming_it_and_the_key(self, table, named):
        """Every malformed budget is refused (exit 78) with its name and the key in the message."""
        with pytest.raises(ConfigError) as caught:
            parse_budgets([table], "budgets")
        assert named in str(caught.value)
        assert caught.value.exit_code == 78

    def test_two_budgets_with_one_name_are_refused(self):
        """Names are unique: the second one is named in the error."""
        with pytest.raises(ConfigError, match=r'budgets "b"\.name: defined twice'):
            parse_budgets([{"name": "b", "usd": 1, "period": "day"}] * 2, "budgets")

    def test_budgets_must_be_an_array_of_tables(self):
        """``budgets = 5`` or a bad LEDGER_BUDGETS is refused."""
        with pytest.raises(ConfigError, match="array of tables"):
            from_mapping({"budgets": 5}, {})
        with pytest.raises(ConfigError, match="LEDGER_BUDGETS: must be JSON"):
            from_mapping({}, {"LEDGER_BUDGETS": "[{"})

    def test_the_fingerprint_changes_with_any_definition(self):
        """Derived counters are keyed by the definitions: any change gives another digest."""
        base = fingerprint([one()])
        assert fingerprint([one()]) == base
        assert fingerprint([one(usd=2)]) != base
        assert fingerprint([one(period="week")]) != base
        assert fingerprint([one(match={"agent": "a"})]) != base
        assert fingerprint([one(per="agent")]) != base
        assert fingerprint([one(warn_pct=50)]) != base


class TestScope:
    @pytest.mark.parametrize(
        ("key", "glob", "hit", "miss"),
        [
            ("agent", "research-*", CallScope(agent="research-1"), CallScope(agent="ops")),
            ("provider", "anthropic", CallScope(provider="anthropic"), CallScope(provider="openai")),
            ("model", "claude-opus-*", CallScope(model="claude-opus-4-1"),
             CallScope(model="claude-sonnet-4-5")),
            ("session", "s-?", CallScope(session="s-1"), CallScope(session="s-10")),
            ("key", "ci", CallScope(key="ci"), CallScope(key="cid")),
            ("tag", "team:*", CallScope(tags=("x", "team:a")), CallScope(tags=("x",))),
        ],
    )  # fmt: skip
    def test_every_match_key_selects_calls_by_glob(self, key, glob, hit, miss):
        """Each match key compares the call's value by glob, case-sensitively."""
        budget = one(match={key: glob})
        assert applicable([budget], hit) == [(budget, None)]
        assert applicable([budget], miss) == []
        assert applicable([budget], CallScope()) == []

    def test_all_given_keys_must_match(self):
        """A budget with two match keys applies only when both match."""
        budget = one(match={"agent": "research-*", "provider": "anthropic"})
        assert applicable([budget], CallScope(agent="research-1", provider="anthropic"))
        assert not applicable([budget], CallScope(agent="research-1", provider="openai"))

    def test_a_budget_without_match_applies_to_every_call(self):
        """No match table: every call."""
        assert applicable([one()], CallScope()) == [(one(), None)]

    def test_per_applies_only_to_calls_carrying_the_value(self):
        """``per = "session"``: one counter per session; calls without one are ignored."""
        budget = one(per="session")
        assert applicable([budget], CallScope(session="a"))[0].per_value == "a"
        assert applicable([budget], CallScope(session="a"))[0].scope_key == "budget:b[a]"
        assert applicable([budget], CallScope(agent="x")) == []

    def test_a_payload_gives_the_scope_it_sealed(self):
        """A verdict's or record's payload: cycle_id is the session, model or model_id."""
        scope = CallScope.from_payload(
            {"provider": "openai", "cycle_id": "s", "agent": "a", "model_id": "m",
             "tags": ["t"], "key": "k"}
        )  # fmt: skip
        assert scope == CallScope("openai", "a", "m", "s", "k", ("t",))


class TestPeriods:
    def test_a_week_runs_from_monday_midnight_in_the_zone(self):
        """Sunday 23:59 Berlin is the old week; Monday 00:00 Berlin (Sunday 23:00 UTC) the new."""
        week = one(period="week")
        sunday = utc("2026-11-29T22:59:00Z")  # 23:59 in Berlin, Sunday
        monday = utc("2026-11-29T23:00:00Z")  # 00:00 in Berlin, Monday
        assert period_bounds(week, sunday, BERLIN) == (
            utc("2026-11-22T23:00:00Z"), utc("2026-11-29T23:00:00Z"),
        )  # fmt: skip
        assert period_bounds(week, monday, BERLIN)[0] == monday
        assert period_key(week, sunday, BERLIN) == "2026-11-23"
        assert period_key(week, monday, BERLIN) == "2026-11-30"
        assert period_key(week, monday, dt.UTC) == "2026-11-23"  # still Sunday in UTC

    @pytest.mark.parametrize(
        ("moment", "start", "end"),
        [
            ("2026-01-31T23:59:59Z", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"),
            ("2026-02-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"),
            ("2028-02-29T12:00:00Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z"),
            ("2026-12-31T23:59:59Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"),
        ],
    )
    def test_a_month_runs_from_the_first_to_the_first(self, moment, start, end):
        """Month ends, a leap February and the year's end."""
        assert period_bounds(one(period="month"), utc(moment), dt.UTC) == (utc(start), utc(end))

    @pytest.mark.parametrize(
        ("moment", "start", "end"),
        [
            ("2026-03-08T12:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"),  # 23 h
            ("2026-11-01T12:00:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"),  # 25 h
        ],
    )
    def test_a_day_on_a_dst_change_is_23_or_25_hours(self, moment, start, end):
        """Calendar days run from the zone's midnight to its next midnight."""
        assert period_bounds(one(), utc(moment), NEW_YORK) == (utc(start), utc(end))

    def test_a_month_across_a_dst_change_starts_and_ends_at_local_midnight(self):
        """March in Berlin: starts at 23:00 UTC (winter time), ends at 22:00 UTC (summer time)."""
        bounds = period_bounds(one(period="month"), utc("2026-03-15T00:00:00Z"), BERLIN)
        assert bounds == (utc("2026-02-28T23:00:00Z"), utc("2026-03-31T22:00:00Z"))

    def test_a_rolling_window_ends_now(self):
        """``rolling:5h`` at T is (T - 5 h, T]; it has no calendar key."""
        window = one(period="rolling:5h")
        now = utc("2026-11-26T10:00:00Z")
        assert period_bounds(window, now, BERLIN) == (utc("2026-11-26T05:00:00Z"), now)
        assert period_key(window, now, BERLIN) is None
