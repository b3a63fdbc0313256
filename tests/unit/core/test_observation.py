"""parse_observer_output, reading_payload and result_from_payload."""

import datetime as dt
import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.events import schema_errors
from ledger.core.observation import (
    MAX_USD_USED_MICROS,
    Deferred,
    Reading,
    Unreachable,
    parse_observer_output,
    reading_payload,
    result_from_payload,
)
from ledger.edges.schemas import load_schema

FETCHED = dt.datetime(2026, 3, 1, 12, 0, 0, 250000, tzinfo=dt.UTC)
BTS = '"billing_ts": "2026-03-01T11:58:00Z"'
BILLING = dt.datetime(2026, 3, 1, 11, 58, tzinfo=dt.UTC)


def parse(text: str | bytes, provider: str = "aggregate"):
    raw = text.encode() if isinstance(text, str) else text
    return parse_observer_output(provider, raw, FETCHED)


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        (f'{{"usd_used": 0, {BTS}}}', 0),
        (f'{{"usd_used": 1, {BTS}}}', 1_000_000),
        (f'{{"usd_used": 0.1, {BTS}}}', 100_000),
        (f'{{"usd_used": 12.345678, {BTS}}}', 12_345_678),
        (f'{{"usd_used": 0.30000000000000004, {BTS}}}', 300_001),  # sub-micro rounds up
        (f'{{"usd_used": 1e2, {BTS}}}', 100_000_000),
        (f'{{"usd_used": 1.5E-3, {BTS}}}', 1_500),
        (f'{{"usd_used": -0.0, {BTS}}}', 0),
        (f'{{"usd_used": 9007199254.740991, {BTS}}}', MAX_USD_USED_MICROS),
        (f'  \n{{"usd_used": 2, {BTS}}}\n\n', 2_000_000),
        (f'{{"usd_used": 2, {BTS}, "server_ts": null}}', 2_000_000),
    ],
)
def test_readings(text, micros):
    result = parse(text)
    assert isinstance(result, Reading)
    assert result.usd_used_micros == micros
    assert result.billing_ts == BILLING
    assert result.fetched_at == FETCHED
    assert result.provider == "aggregate"


def test_exact_decimal_not_float():
    # 0.1 + 0.2 in float is 0.30000000000000004; the parse must see the text
    result = parse(f'{{"usd_used": 1234567.891011, {BTS}}}')
    assert isinstance(result, Reading)
    assert result.usd_used_micros == 1_234_567_891_011


def test_server_ts_with_offset_is_normalized_to_utc():
    result = parse(
        '{"usd_used": 1, "billing_ts": "2026-03-01T12:58:00+01:00",'
        ' "server_ts": "2026-03-01T12:00:01.5Z"}'
    )
    assert isinstance(result, Reading)
    assert result.billing_ts == BILLING
    assert result.server_ts == dt.datetime(2026, 3, 1, 12, 0, 1, 500000, tzinfo=dt.UTC)
    assert result.server_ts.tzinfo == dt.UTC


def test_unreachable_and_defer_shapes():
    assert parse('{"_unreachable": true, "_reason": "HTTP 500"}') == Unreachable(
        "aggregate", "HTTP 500", FETCHED
    )
    assert parse('{"_defer": true, "_reason": "rate_limited"}', "openai") == Deferred(
        "openai", "rate_limited", FETCHED
    )


def test_reported_reason_is_cleaned():
    result = parse(json.dumps({"_unreachable": True, "_reason": "a\nb\x00" + "x" * 900}))
    assert isinstance(result, Unreachable)
    assert "\n" not in result.reason
    assert "\x00" not in result.reason
    assert len(result.reason) == 500
    empty = parse('{"_defer": true, "_reason": ""}')
    assert empty == Deferred("aggregate", "observer deferred", FETCHED)


@pytest.mark.parametrize(
    ("raw", "reason_part"),
    [
        (b"", "observer printed nothing"),
        (b"   \n", "observer printed nothing"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"{usd_used: 1}", "invalid JSON"),
        (b'{"usd_used": 1,', "invalid JSON"),
        (b"[1, 2]", "is a JSON array, not an object"),
        (b'"hello"', "is a JSON string, not an object"),
        (b"42", "is a JSON number, not an object"),
        (b"null", "is a JSON null, not an object"),
        (b"true", "is a JSON boolean, not an object"),
        (f'{{"usd_used": NaN, {BTS}}}'.encode(), "non-finite number NaN"),
        (f'{{"usd_used": Infinity, {BTS}}}'.encode(), "non-finite number Infinity"),
        (f'{{"usd_used": -Infinity, {BTS}}}'.encode(), "non-finite number -Infinity"),
        (f'{{"usd_used": -1, {BTS}}}'.encode(), "usd_used is negative"),
        (f'{{"usd_used": -0.000001, {BTS}}}'.encode(), "usd_used is negative"),
        (f'{{"usd_used": true, {BTS}}}'.encode(), "usd_used must be a number, got boolean"),
        (f'{{"usd_used": false, {BTS}}}'.encode(), "usd_used must be a number, got boolean"),
        (f'{{"usd_used": "1.5", {BTS}}}'.encode(), "usd_used must be a number, got string"),
        (f'{{"usd_used": null, {BTS}}}'.encode(), "usd_used must be a number, got null"),
        (f'{{"usd_used": [1], {BTS}}}'.encode(), "usd_used must be a number, got array"),
        (f'{{"usd_used": 1e999999999, {BTS}}}'.encode(), "usd_used is out of range"),
        (f'{{"usd_used": 9007199254.740992, {BTS}}}'.encode(), "usd_used is out of range"),
        (b'{"usd_used": 1}', "missing field billing_ts"),
        (f"{{{BTS}}}".encode(), "missing field usd_used"),
        (b"{}", "missing field usd_used"),
        (b'{"usd_used": 1, "billing_ts": 1772366280}', "billing_ts must be a string, got number"),
        (b'{"usd_used": 1, "billing_ts": null}', "billing_ts must be a string, got null"),
        (b'{"usd_used": 1, "billing_ts": "yesterday"}', "billing_ts is not an ISO-8601"),
        (b'{"usd_used": 1, "billing_ts": "2026-03-01T11:58:00"}', "billing_ts is not an ISO-8601"),
        (b'{"usd_used": 1, "billing_ts": "2026-03-01"}', "billing_ts is not an ISO-8601"),
        (b'{"usd_used": 1, "billing_ts": "2026-13-01T00:00:00Z"}', "billing_ts is not an ISO-8601"),
        (b'{"usd_used": 1, "billing_ts": "0001-01-01T00:00:00+01:00"}', "billing_ts"),
        (b'{"usd_used": 1, "billing_ts": "1969-12-31T00:00:00Z"}', "before 1970"),
        (f'{{"usd_used": 1, {BTS}, "server_ts": 5}}'.encode(), "server_ts must be a string"),
        (f'{{"usd_used": 1, {BTS}, "server_ts": "noon"}}'.encode(), "server_ts is not an ISO"),
        (
            f'{{"usd_used": 1, {BTS}, "server_ts": "2026-03-01T12:00:00"}}'.encode(),
            "server_ts is not an ISO",
        ),
        (f'{{"usd_used": 1, {BTS}, "currency": "usd"}}'.encode(), "unexpected field(s): currency"),
        (f'{{"usd_used": 1, "usd_used": 2, {BTS}}}'.encode(), "duplicate key 'usd_used'"),
        (f'{{"usd_used": 1, {BTS}}} {{"usd_used": 2, {BTS}}}'.encode(), "trailing data"),
        (f'{{"usd_used": 1, {BTS}}}\n{{}}'.encode(), "trailing data"),
        (f'{{"usd_used": 1, {BTS}}}garbage'.encode(), "trailing data"),
        (b'{"_unreachable": false, "_reason": "x"}', "_unreachable must be true"),
        (b'{"_unreachable": 1, "_reason": "x"}', "_unreachable must be true"),
        (b'{"_unreachable": true}', "_unreachable needs a string _reason, got null"),
        (b'{"_unreachable": true, "_reason": 5}', "_unreachable needs a string _reason"),
        (b'{"_defer": true}', "_defer needs a string _reason"),
        (b'{"_defer": "yes", "_reason": "x"}', "_defer must be true"),
        (b'{"_defer": true, "_reason": "x", "usd_used": 1}', "unexpected field(s) beside _defer"),
        (b'{"_defer": true, "_unreachable": true, "_reason": "x"}', "both _unreachable and _defer"),
        (b'{"_reason": "x"}', "unexpected field(s): _reason"),
        (b"[" * 100_000, "invalid JSON"),
        (b'{"usd_used": 1' + b"0" * 5000 + b", " + BTS.encode() + b"}", "invalid JSON"),
    ],
)
def test_malformed_output_is_unreachable(raw, reason_part):
    result = parse(raw)
    assert isinstance(result, Unreachable), result
    assert reason_part in result.reason
    assert result.fetched_at == FETCHED
    assert 0 < len(result.reason) <= 500
    assert schema_errors(reading_payload(result), load_schema("budget.observation")) is None


def test_caller_errors_raise():
    with pytest.raises(ValueError, match="provider"):
        parse_observer_output("Not Valid", b"{}", FETCHED)
    with pytest.raises(ValueError, match="provider"):
        parse_observer_output("aggregate\n", b"{}", FETCHED)
    with pytest.raises(ValueError, match="timezone"):
        parse_observer_output("aggregate", b"{}", dt.datetime(2026, 3, 1))  # noqa: DTZ001


def test_value_invariants():
    with pytest.raises(ValueError):
        Reading("aggregate", -1, BILLING, None, FETCHED)
    with pytest.raises(ValueError):
        Reading("aggregate", True, BILLING, None, FETCHED)
    with pytest.raises(ValueError):
        Reading("aggregate", 1, BILLING.replace(tzinfo=None), None, FETCHED)
    with pytest.raises(ValueError):
        Unreachable("aggregate", "", FETCHED)
    with pytest.raises(ValueError):
        Deferred("UPPER", "x", FETCHED)


SCHEMA_TS = "2026-03-01T12:00:00.250000Z"


def test_reading_payload_and_back():
    reading = Reading(
        "anthropic",
        5_250_000,
        BILLING,
        dt.datetime(2026, 3, 1, 12, 0, 1, tzinfo=dt.UTC),
        FETCHED,
    )
    payload = reading_payload(reading)
    assert payload == {
        "provider": "anthropic",
        "ok": True,
        "usd_used_micros": 5_250_000,
        "billing_ts": "2026-03-01T11:58:00.000000Z",
        "server_ts": "2026-03-01T12:00:01.000000Z",
        "fetched_at": SCHEMA_TS,
        "reason": None,
    }
    assert schema_errors(payload, load_schema("budget.observation")) is None
    assert result_from_payload(payload) == reading
    without_server = Reading("aggregate", 0, BILLING, None, FETCHED)
    payload = reading_payload(without_server, source="verdict")
    assert payload["server_ts"] is None
    assert payload["source"] == "verdict"
    assert schema_errors(payload, load_schema("budget.observation")) is None
    assert result_from_payload(payload) == without_server


def test_unreachable_payload_and_back():
    result = Unreachable("openai", "observer exited with status 3", FETCHED)
    payload = reading_payload(result, source="reconcile")
    assert payload == {
        "provider": "openai",
        "ok": False,
        "usd_used_micros": None,
        "billing_ts": None,
        "server_ts": None,
        "fetched_at": SCHEMA_TS,
        "reason": "observer exited with status 3",
        "source": "reconcile",
    }
    assert schema_errors(payload, load_schema("budget.observation")) is None
    assert result_from_payload(payload) == result


def test_payload_from_parsed_output_round_trips():
    result = parse('{"usd_used": 3.5, "billing_ts": "2026-03-01T11:58:00.123456789+00:00"}')
    assert isinstance(result, Reading)
    payload = reading_payload(result)
    assert schema_errors(payload, load_schema("budget.observation")) is None
    assert result_from_payload(payload) == result


def test_poll_source_is_recorded_and_valid():
    """A reading taken by a poll carries source poll, which the schema admits."""
    reading = Reading("openai", 49_000_000, BILLING, None, FETCHED)
    payload = reading_payload(reading, source="poll")
    assert payload["source"] == "poll"
    assert schema_errors(payload, load_schema("budget.observation")) is None
    assert result_from_payload(payload) == reading


def test_deferred_and_bad_source_are_not_payloads():
    with pytest.raises(ValueError, match="deferred"):
        reading_payload(Deferred("aggregate", "rate_limited", FETCHED))
    with pytest.raises(ValueError, match="source"):
        reading_payload(Unreachable("aggregate", "x", FETCHED), source="cron")


def _good_payload():
    return reading_payload(Reading("aggregate", 1, BILLING, None, FETCHED))


@pytest.mark.parametrize(
    "change",
    [
        {"ok": "yes"},
        {"ok": False},  # an unreachable payload may not carry a figure
        {"reason": "x"},
        {"usd_used_micros": -1},
        {"usd_used_micros": 1.5},
        {"usd_used_micros": True},
        {"billing_ts": "2026-03-01T11:58:00Z"},
        {"fetched_at": None},
        {"provider": "Bad"},
        {"source": "cron"},
        {"extra": 1},
    ],
)
def test_result_from_bad_payload_raises(change):
    payload = {**_good_payload(), **change}
    with pytest.raises(ValueError):
        result_from_payload(payload)
    assert schema_errors(payload, load_schema("budget.observation")) is not None


def test_result_from_payload_missing_field():
    payload = _good_payload()
    del payload["server_ts"]
    with pytest.raises(ValueError, match="server_ts"):
        result_from_payload(payload)


def test_schema_agrees_with_jsonschema():
    import jsonschema

    schema = load_schema("budget.observation")
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = [
        _good_payload(),
        reading_payload(Unreachable("openai", "down", FETCHED), source="manual"),
    ]
    for payload in good:
        assert validator.is_valid(payload)
    bad = {**_good_payload(), "ok": False}
    assert not validator.is_valid(bad)
    bad = {**_good_payload(), "reason": "why"}
    assert not validator.is_valid(bad)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(st.binary(max_size=300))
def test_any_bytes_never_raise(raw):
    result = parse(raw)
    assert isinstance(result, (Reading, Unreachable, Deferred))
    if not isinstance(result, Deferred):
        assert schema_errors(reading_payload(result), load_schema("budget.observation")) is None


@given(JSONISH)
def test_any_json_never_raises(value):
    result = parse(json.dumps(value))
    if isinstance(result, Reading):
        assert isinstance(value, dict)
        assert {"usd_used", "billing_ts"} <= set(value)
    if not isinstance(result, Deferred):
        assert schema_errors(reading_payload(result), load_schema("budget.observation")) is None
        assert result_from_payload(reading_payload(result)) == result


@given(st.integers(min_value=0, max_value=MAX_USD_USED_MICROS))
def test_micros_are_exact(micros):
    text = str(Decimal(micros).scaleb(-6))
    result = parse(f'{{"usd_used": {text}, {BTS}}}')
    assert isinstance(result, Reading), (text, result)
    assert result.usd_used_micros == micros
