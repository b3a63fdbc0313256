"""Which entries are alerts, what they say, and how ``[[alerts]]`` is validated."""

import pytest

from ledger.core.alerts import alert_for_entry, alert_settings, broken_alert, redacted_url
from ledger.core.config import from_mapping
from ledger.errors import ConfigError

REF = "ab" * 32


def halt_payload(**extra):
    payload = {
        "deciding_cap": "aggregate",
        "utc_day": "2026-03-02",
        "budget_day": "2026-03-02",
        "usd_used_micros": 9_800_000,
        "usd_reserved_micros": 0,
        "cap_micros": 10_000_000,
        "agent": None,
        "uncertainty_reason": None,
    }
    payload.update(extra)
    return payload


def test_verdicts_map_to_their_states():
    ts = "2026-03-02T10:00:00.000000Z"
    warn = alert_for_entry("budget.warn_90", halt_payload(), REF, ts)
    halt = alert_for_entry("budget.halt_100", halt_payload(), REF, ts)
    unsure = alert_for_entry(
        "budget.halt_uncertainty", halt_payload(uncertainty_reason="billing_stale"), REF, ts
    )
    assert warn is not None
    assert warn.event == "warn"
    assert halt is not None
    assert halt.event == "halt"
    assert unsure is not None
    assert unsure.event == "uncertainty"
    assert alert_for_entry("budget.allow", halt_payload(), REF, ts) is None
    assert alert_for_entry("budget.record_call", {}, REF, ts) is None


def test_text_is_one_readable_line_with_dollars_and_a_short_ref():
    alert = alert_for_entry(
        "budget.halt_100", halt_payload(agent="research-1"), REF, "2026-03-02T10:00:00.000000Z"
    )
    assert alert is not None
    assert "\n" not in alert.text
    assert "$9.80 used" in alert.text
    assert "cap $10.00" in alert.text
    assert "research-1" in alert.text
    assert REF[:12] in alert.text
    assert REF not in alert.text
    body = alert.body()
    assert set(body) == {"text", "event", "scope", "verdict_ref", "at"}
    assert body["verdict_ref"] == REF


def test_uncertainty_text_names_what_lifts_it():
    alert = alert_for_entry(
        "budget.halt_uncertainty",
        halt_payload(uncertainty_reason="counter_drift"),
        REF,
        "2026-03-02T10:00:00.000000Z",
    )
    assert alert is not None
    assert "counter_drift" in alert.text
    assert "ledger reconcile" in alert.text


def test_key_is_once_per_state_scope_and_budget_day():
    ts = "2026-03-02T10:00:00.000000Z"
    first = alert_for_entry("budget.halt_100", halt_payload(), REF, ts)
    again = alert_for_entry("budget.halt_100", halt_payload(), "cd" * 32, ts)
    provider = alert_for_entry(
        "budget.halt_100", halt_payload(deciding_cap="provider:openai"), REF, ts
    )
    next_day = alert_for_entry("budget.halt_100", halt_payload(budget_day="2026-03-03"), REF, ts)
    assert first is not None
    assert again is not None
    assert provider is not None
    assert next_day is not None
    assert first.key == again.key
    assert len({first.key, provider.key, next_day.key}) == 3


def test_budget_scopes_are_once_per_budget_period():
    payload = halt_payload(
        deciding_cap="budget:research[s1]",
        budgets=[{"name": "research", "period_start": "2026-03-01T00:00:00Z"}],
    )
    alert = alert_for_entry("budget.halt_100", payload, REF, "2026-03-02T10:00:00.000000Z")
    assert alert is not None
    assert alert.period == "2026-03-01T00:00:00Z"


def test_blocking_reconcile_is_drift_and_a_passing_one_is_nothing():
    payload = {
        "provider": "openai",
        "utc_day": "2026-03-02",
        "blocking": True,
        "drift_pct": 7.5,
        "counter_micros": 1_000_000,
        "billing_micros": 1_081_000,
    }
    alert = alert_for_entry("budget.reconcile", payload, REF, "2026-03-02T10:00:00.000000Z")
    assert alert is not None
    assert (alert.event, alert.scope) == ("drift", "provider:openai")
    assert "$1.081" in alert.text
    assert alert_for_entry("budget.reconcile", {**payload, "blocking": False}, REF, "x") is None


def test_broken_alert_names_the_line_and_recover():
    alert = broken_alert(3, "bad signature", "2026-03-02T10:00:00.000000Z", "2026-03-02")
    assert alert.event == "broken"
    assert "line 3" in alert.text
    assert "ledger recover" in alert.text


def test_alerts_config_parses_and_takes_the_smallest_check_seconds():
    document = {
        "alerts": [
            {"url": "https://hooks.example/a", "on": ["halt", "broken"]},
            {"url": "http://127.0.0.1:9/b", "check_seconds": 3, "timeout_seconds": 4},
        ]
    }
    config = from_mapping(document, {})
    assert [rule.url for rule in config.alert_rules] == [
        "https://hooks.example/a",
        "http://127.0.0.1:9/b",
    ]
    assert config.alert_rules[0].on == frozenset({"halt", "broken"})
    assert config.alert_rules[1].on == frozenset(
        {"warn", "halt", "uncertainty", "broken", "unavailable", "drift"}
    )
    assert config.alert_check_seconds == 3
    assert config.alert_timeout_seconds == 4
    assert from_mapping({}, {}).alert_check_seconds == 10
    assert from_mapping({}, {}).alert_timeout_seconds == 10
    env = {
        "LEDGER_ALERTS": '[{"url": "http://127.0.0.1:9/x", "on": ["warn"]}]',
        "LEDGER_ALERTS_CHECK_SECONDS": "2",
        "LEDGER_ALERTS_TIMEOUT_SECONDS": "7",
    }
    from_env = from_mapping({}, env)
    assert from_env.alert_rules[0].on == frozenset({"warn"})
    assert from_env.alert_check_seconds == 2
    assert from_env.alert_timeout_seconds == 7


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.slack.com/services/T0/B0/XXXX", "https://hooks.slack.com/…"),
        ("http://alice:s3cret@127.0.0.1:8080/x?token=abc", "http://127.0.0.1:8080/…"),
        ("https://[::1]:9/hook", "https://[::1]:9/…"),
    ],
)
def test_a_webhook_url_is_shown_without_path_query_or_credentials(url, shown):
    assert redacted_url(url) == shown


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"url": "ftp://x/y"}, "alerts[0].url"),
        ({"url": "https://x/y", "on": ["halted"]}, "alerts[0].on"),
        ({"url": "https://x/y", "on": []}, "alerts[0].on"),
        ({"url": "https://x/y", "colour": "red"}, "alerts[0]: unknown key colour"),
        ({"url": "https://x/y", "check_seconds": 0}, "alerts[0].check_seconds"),
        ({"url": "https://x/y", "timeout_seconds": 0}, "alerts[0].timeout_seconds"),
        ("https://x/y", "alerts[0]: must be a table"),
    ],
)
def test_malformed_alerts_name_the_key(value, named):
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
        alert_settings([value], "alerts")


def test_alerts_must_be_an_array_of_tables():
    with pytest.raises(ConfigError, match=r"\[\[alerts\]\]"):
        from_mapping({"alerts": {"url": "https://x/y"}}, {})
    with pytest.raises(ConfigError, match="LEDGER_ALERTS_CHECK_SECONDS"):
        from_mapping({}, {"LEDGER_ALERTS_CHECK_SECONDS": "soon"})


def test_rolling_budgets_are_once_per_budget_day_not_per_window_start():
    def payload(start):
        return halt_payload(
            deciding_cap="budget:burst",
            budgets=[{"name": "burst", "period": "rolling:5h", "period_start": start}],
        )

    ts = "2026-03-02T10:00:00.000000Z"
    first = alert_for_entry("budget.halt_100", payload("2026-03-02T05:00:00Z"), REF, ts)
    later = alert_for_entry("budget.halt_100", payload("2026-03-02T05:01:00Z"), REF, ts)
    assert first is not None
    assert later is not None
    assert first.key == later.key
    assert first.period == "2026-03-02"


def test_a_budget_name_that_prefixes_another_is_not_taken_for_it():
    payload = halt_payload(
        deciding_cap="budget:team-a",
        budgets=[
            {"name": "team", "period": "month", "period_start": "2026-03-01T00:00:00Z"},
            {"name": "team-a", "period": "week", "period_start": "2026-03-02T00:00:00Z"},
        ],
    )
    alert = alert_for_entry("budget.halt_100", payload, REF, "2026-03-02T10:00:00.000000Z")
    assert alert is not None
    assert alert.period == "2026-03-02T00:00:00Z"


@pytest.mark.parametrize(
    ("scope", "budget", "words"),
    [
        ("aggregate", None, "aggregate on 2026-03-04"),
        ("provider:openai", None, "provider:openai on 2026-03-04"),
        ("budget:d", {"period": "day", "period_start": "2026-03-03T23:00:00.000000Z",
                      "period_end": "2026-03-04T23:00:00.000000Z"}, "budget:d on 2026-03-04"),
        ("budget:w[a1]", {"period": "week", "period_start": "2026-03-01T23:00:00.000000Z",
                          "period_end": "2026-03-08T23:00:00.000000Z"},
         "budget:w[`a1`] in the week starting 2026-03-02"),
        ("budget:m", {"period": "month", "period_start": "2026-02-28T23:00:00.000000Z",
                      "period_end": "2026-03-31T22:00:00.000000Z"},
         "budget:m in the month starting 2026-03-01"),
        ("budget:r", {"period": "rolling:5h", "period_start": "2026-03-04T05:00:00.000000Z",
                      "period_end": "2026-03-04T10:00:00.000000Z"},
         "budget:r in the rolling window 2026-03-04 05:00Z to 2026-03-04 10:00Z"),
    ],
)  # fmt: skip
def test_every_scope_gives_its_period_the_same_way(scope, budget, words):
    import zoneinfo

    payload = halt_payload(deciding_cap=scope, budget_day="2026-03-04")
    if budget is not None:
        payload["budgets"] = [{"name": scope.removeprefix("budget:").split("[")[0], **budget}]
    zone = zoneinfo.ZoneInfo("Europe/Berlin")
    alert = alert_for_entry("budget.halt_100", payload, REF, "2026-03-04T10:00:00.000000Z", zone)
    assert alert is not None
    assert f"for {words};" in alert.text, alert.text
    assert "T00:00:00" not in alert.text


def test_a_sealed_finding_is_sent_as_broken():
    payload = {"line": 7, "reason": "signature does not verify"}
    alert = alert_for_entry("chain.finding", payload, REF, "2026-03-02T10:00:00.000000Z")
    assert alert is not None
    assert (alert.event, alert.scope, alert.period) == ("broken", "chain", "2026-03-02")
    assert "line 7 (signature does not verify)" in alert.text
    assert "ledger recover" in alert.text
