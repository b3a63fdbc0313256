"""Verified entries the counter cannot fold halt it; loa's payloads fold as loa meant them."""

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from ledger.core.foldable import IGNORED, Foldable, check_entry
from ledger.core.state import empty_state, fold_verified, unfoldable_problem
from ledger.edges.schemas import load_schema, schema_dir

TS = "2026-06-01T12:00:00.000000Z"
DAY = "2026-06-01"
KNOWN = sorted(p.name.removesuffix(".schema.json") for p in schema_dir().glob("*.schema.json"))


def schema_for(event_type):
    try:
        return load_schema(event_type)
    except Exception:
        return None


def record(**overrides):
    payload = {
        "provider": "openai",
        "actual_micros": 1_000_000,
        "utc_day": DAY,
        "verdict_ref": None,
        "settled": False,
    }
    payload.update(overrides)
    return payload


def fold_one(event_type, payload, ts=TS):
    state = empty_state()
    fold_verified(state, event_type, ts, payload, "0" * 64, schema_for)
    return state


def test_a_good_record_folds():
    state = fold_one("budget.record_call", record())
    assert state["usd"]["spend"] == {DAY: {"openai": 1_000_000}}
    assert unfoldable_problem(state) is None


def test_other_namespaces_are_carried_and_ignored():
    assert check_entry("othertool.thing", TS, {"anything": [1, 2]}, schema_for) == IGNORED
    assert check_entry("othertool.thing", TS, ["not", "an", "object"], schema_for) == IGNORED
    state = fold_one("othertool.thing", ["x"])
    assert state["meta"]["entries"] == 1
    assert unfoldable_problem(state) is None


def test_unknown_types_in_our_namespaces_halt_naming_the_line():
    state = empty_state()
    fold_verified(state, "budget.record_call", TS, record(), "0" * 64, schema_for)
    fold_verified(state, "budget.spend", TS, {"provider": "openai", "actual_micros": 9}, "1" * 64,
                  schema_for)  # fmt: skip
    problem = unfoldable_problem(state)
    assert problem is not None
    assert "line 2: budget.spend: unknown event type" in problem
    assert "ledger recover" in problem


def test_hostile_record_payloads_are_never_folded():
    cases = {
        "string amount": record(actual_micros="5"),
        "fractional amount": record(actual_micros=5000000.5),
        "negative amount": record(actual_micros=-1),
        "missing day": {k: v for k, v in record().items() if k != "utc_day"},
        "empty": {},
        "impossible day": record(utc_day="2026-13-45"),
        "day long past": record(utc_day="2020-01-01"),
        "day before, unsettled": record(utc_day="2026-05-31"),
        "nested junk": record(model_id={"a": [1, {"b": None}]}),
    }
    for name, payload in cases.items():
        state = fold_one("budget.record_call", payload)
        assert state["usd"]["spend"] == {}, name
        assert unfoldable_problem(state) is not None, name
    settled_yesterday = fold_one("budget.record_call", record(utc_day="2026-05-31", settled=True))
    assert unfoldable_problem(settled_yesterday) is None


def test_negative_and_textual_token_counts_halt():
    for value in (-800, "5e5", 2.5, None, True):
        payload = {
            "convoy": "cv", "agent": "a1", "input_tokens": value, "output_tokens": 0,
            "check_ref": None, "settled_ref": None, "known_convoy": True,
        }  # fmt: skip
        state = fold_one("tokens.record", payload)
        assert unfoldable_problem(state) is not None, value


def test_loa_payloads_fold_exactly():
    sample = Path(__file__).resolve().parents[2] / "fixtures" / "loa" / "loa-sample-chain.jsonl"
    lines = [json.loads(line) for line in sample.read_text().splitlines()]
    state = empty_state()
    for entry in lines:
        fold_verified(state, entry["event_type"], entry["ts_utc"], entry["payload"],
                      "0" * 64, schema_for)  # fmt: skip
    assert unfoldable_problem(state) is None
    assert state["usd"]["spend"]["2026-11-21"] == {"anthropic": 1_420_000}
    assert state["usd"]["reconciles"]["anthropic"]["drift_pct"] == "0.0000"
    assert state["usd"]["reservations"] == {}


def test_loa_amounts_convert_from_their_shortest_decimal_text():
    payload = {"actual_usd": 0.1 + 0.2, "usd_used_post": 0, "provider": "x", "utc_day": DAY}
    checked = check_entry("budget.record_call", TS, payload, schema_for)
    assert isinstance(checked, Foldable)
    assert checked.payload["actual_micros"] == 300_001  # 0.30000000000000004, rounded up
    payload["actual_usd"] = 1.42
    exact = check_entry("budget.record_call", TS, payload, schema_for)
    assert isinstance(exact, Foldable)
    assert exact.payload["actual_micros"] == 1_420_000
    for bad in (-1.0, "1.42", None, True, float("nan")):
        payload["actual_usd"] = bad
        assert isinstance(check_entry("budget.record_call", TS, payload, schema_for), str), bad


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                               max_size=5),
    max_leaves=20,
)  # fmt: skip


@given(
    event_type=st.sampled_from([*KNOWN, "budget.spend", "tokens.usage", "ledger.other", "x.y"]),
    payload=json_values,
    ts=st.sampled_from([TS, "2026-06-01T00:00:00.000000Z", "9999-12-31T23:59:59.999999Z"]),
)
def test_any_payload_either_folds_or_halts_never_raises(event_type, payload, ts):
    state = empty_state()
    fold_verified(state, event_type, ts, payload, "0" * 64, schema_for)
    assert state["meta"]["entries"] == 1
    json.dumps(state)  # still storable


@given(
    event_type=st.sampled_from(KNOWN),
    field=st.text(min_size=1, max_size=20),
    value=json_values,
)
def test_mutating_one_field_of_a_valid_payload_folds_or_halts(event_type, field, value):
    payload = {"provider": "openai", "utc_day": DAY, "convoy": "c", "agent": "a"}
    payload[field] = value
    state = empty_state()
    fold_verified(state, event_type, TS, payload, "0" * 64, schema_for)
    assert state["meta"]["entries"] == 1
