"""The agent-budget schemas use only the supported subset and are valid JSON Schema."""

import json
from pathlib import Path

import pytest

from ledger.core.events import SUPPORTED_KEYWORDS, schema_errors

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
FAMILIES = ("tokens.", "turns.", "tools.", "time.", "hook.")
NAMES = sorted(p.name for p in SCHEMAS.glob("*.schema.json") if p.name.startswith(FAMILIES))
# Keys whose values are maps of names to schemas, not keywords.
_MAPS = {"properties"}


def _keywords(schema, found):
    for key, value in schema.items():
        found.add(key)
        if key in _MAPS:
            for sub in value.values():
                _keywords(sub, found)
        elif key in {"items", "additionalProperties"} and isinstance(value, dict):
            _keywords(value, found)
        elif key == "anyOf":
            for sub in value:
                _keywords(sub, found)
    return found


def test_every_agent_event_type_has_a_schema():
    expected = {
        "tokens.budget_created",
        "tokens.budget_deleted",
        "tokens.check",
        "tokens.record",
        "turns.budget_created",
        "turns.phase_started",
        "turns.turn",
        "turns.check",
        "tools.budget_created",
        "tools.use",
        "tools.check",
        "time.started",
        "hook.pre_tool_use",
    }
    assert {name.removesuffix(".schema.json") for name in NAMES} == expected


@pytest.mark.parametrize("name", NAMES)
def test_schema_is_valid_and_in_the_subset(name):
    from jsonschema import Draft202012Validator

    schema = json.loads((SCHEMAS / name).read_text())
    Draft202012Validator.check_schema(schema)
    assert _keywords(schema, set()) <= SUPPORTED_KEYWORDS
    assert schema["title"] == name.removesuffix(".schema.json")
    assert schema["additionalProperties"] is False


def test_both_validators_agree_on_samples():
    from jsonschema import Draft202012Validator

    schema = json.loads((SCHEMAS / "tokens.check.schema.json").read_text())
    validator = Draft202012Validator(schema)
    good = {
        "convoy": "c",
        "agent": "a",
        "projected_tokens": 5,
        "allowed": True,
        "reason": "ok",
        "remaining_tokens": 1,
        "usage_pct": "1.0000",
        "agent_usage_pct": "2.0000",
        "convoy_max_tokens": 1,
        "agent_max_tokens": 1,
        "convoy_used_tokens": 0,
        "convoy_reserved_tokens": 0,
        "agent_used_tokens": 0,
        "agent_reserved_tokens": 0,
        "diagnostic": None,
        "local_time": "2026-01-01T00:00:00.000000Z",
        "reservation": {"tokens": 5, "expires_at": "2026-01-01T00:15:00.000000Z"},
    }
    bad = [
        {**good, "reason": "maybe"},
        {**good, "usage_pct": 1.5},
        {**good, "convoy": "-bad"},
        {**good, "reservation": {"tokens": -1, "expires_at": "x"}},
        {**good, "extra": 1},
    ]
    assert schema_errors(good, schema) is None
    assert validator.is_valid(good)
    for payload in bad:
        assert schema_errors(payload, schema) is not None
        assert not validator.is_valid(payload)
