"""ledger.core.events and ledger.core.schemacode: the JSON Schema subset that validates payloads.

The schemas in ``schemas/`` are the source of truth; the product checks payloads
with its own interpreter of a small subset of JSON Schema (``jsonschema`` is too
slow to import on the per-call path), and a long-lived process with a compiled
predicate of each schema. These tests hold both to ``jsonschema`` on every
schema shipped.
"""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core import events, schemacode
from ledger.core.events import SUPPORTED_KEYWORDS, schema_errors, validate_payload
from ledger.core.schemacode import predicate
from ledger.edges.schemas import load_schema, schema_dir
from ledger.errors import SchemaValidationError

SCHEMA_FILES = sorted(schema_dir().glob("*.schema.json"))
SCHEMA_IDS = [path.name.removesuffix(".schema.json") for path in SCHEMA_FILES]
RECORD_CALL = {
    "provider": "openai",
    "actual_micros": 1000,
    "utc_day": "2026-11-22",
    "verdict_ref": None,
    "settled": False,
}

# Payloads never hold floats (canonical_bytes refuses them), so neither do these.
any_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


def _load(path: Path) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(path.read_bytes())
    return schema


def _subschemas(schema: dict[str, Any]):
    """Every schema object inside ``schema``, itself included."""
    yield schema
    for child in schema.get("properties", {}).values():
        yield from _subschemas(child)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _subschemas(schema[key])
    for option in schema.get("anyOf", []):
        yield from _subschemas(option)


def _near(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that mostly fit ``schema`` and sometimes miss it by a little or a lot."""
    options: list[st.SearchStrategy[Any]] = [any_json]
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"]))
    if "const" in schema:
        options.append(st.just(schema["const"]))
    for option in schema.get("anyOf", []):
        options.append(_near(option))
    kinds = schema.get("type", [])
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind == "string":
            if "pattern" in schema:
                options.append(st.from_regex(schema["pattern"]))
                options.append(st.from_regex(schema["pattern"], fullmatch=True))
            limit = schema.get("maxLength")
            if limit is not None:
                options.append(st.text(min_size=max(0, limit - 2), max_size=limit + 2))
            options.append(st.text(max_size=10))
        elif kind in {"integer", "number"}:
            low = schema.get("minimum", -10)
            high = schema.get("maximum", low + 10**6)
            options.append(st.integers(min_value=low - 2, max_value=high + 2))
            options.append(st.sampled_from([low - 1, low, low + 1, high - 1, high, high + 1]))
        elif kind == "boolean":
            options.append(st.booleans())
        elif kind == "null":
            options.append(st.none())
        elif kind == "object":
            options.append(_near_object(schema))
        elif kind == "array":
            options.append(st.lists(_near(schema.get("items", {})), max_size=4))
    return st.one_of(options)


@st.composite
def _near_object(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties", {})
    required = list(schema.get("required", []))
    value: dict[str, Any] = {}
    for name, child in properties.items():
        if name in required or draw(st.booleans()):
            value[name] = draw(_near(child))
    if required and draw(st.integers(0, 9)) == 0:
        value.pop(draw(st.sampled_from(required)), None)
    if draw(st.integers(0, 9)) == 0:
        value.update(draw(st.dictionaries(st.text(max_size=5), any_json, min_size=1, max_size=2)))
    return value


class TestSchemaFiles:
    def test_schemas_exist(self):
        """At least the two core event types ship a schema."""
        assert {"budget.record_call", "ledger.key_rotated"} <= set(SCHEMA_IDS)

    @pytest.mark.parametrize("path", SCHEMA_FILES, ids=SCHEMA_IDS)
    def test_only_supported_keywords(self, path):
        """Every schema uses only the keywords the interpreter implements."""
        for sub in _subschemas(_load(path)):
            unsupported = set(sub) - SUPPORTED_KEYWORDS
            assert not unsupported, f"{path.name} uses {sorted(unsupported)}"

    @pytest.mark.parametrize("path", SCHEMA_FILES, ids=SCHEMA_IDS)
    def test_jsonschema_accepts_schema(self, path):
        """jsonschema's draft 2020-12 meta-schema accepts each schema."""
        import jsonschema

        schema = _load(path)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema.get("$schema") == "https://json-schema.org/draft/2020-12/schema"

    @pytest.mark.parametrize("path", SCHEMA_FILES, ids=SCHEMA_IDS)
    def test_patterns_use_portable_constructs(self, path):
        """Patterns avoid constructs whose meaning differs across regex engines
        (\\w, \\s, \\b, lookarounds, inline flags, a $ before the end)."""
        for sub in _subschemas(_load(path)):
            pattern = sub.get("pattern")
            if pattern is None:
                continue
            for construct in ("\\w", "\\W", "\\s", "\\S", "\\b", "\\B"):
                assert construct not in pattern, f"{path.name}: {pattern!r} uses {construct}"
            assert not re.search(r"\(\?(?!:)", pattern), f"{path.name}: {pattern!r}"
            assert "$" not in pattern[:-1].replace("\\$", ""), f"{path.name}: {pattern!r}"

    @pytest.mark.parametrize("path", SCHEMA_FILES, ids=SCHEMA_IDS)
    def test_load_schema_by_event_type(self, path):
        """load_schema finds each schema by its event type, whose title it is."""
        event_type = path.name.removesuffix(".schema.json")
        assert load_schema(event_type) == _load(path)
        assert _load(path)["title"] == event_type

    @pytest.mark.parametrize("path", SCHEMA_FILES, ids=SCHEMA_IDS)
    def test_objects_are_closed(self, path):
        """Payload schemas are closed objects: unknown fields are refused."""
        schema = _load(path)
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False


def _ecma262_validator_class() -> Any:
    """jsonschema's draft 2020-12 validator with ECMA-262 ``pattern`` semantics.

    jsonschema matches ``pattern`` with Python's ``re``, which differs from ECMA-262
    (what JSON Schema specifies) in two ways that matter for the constructs our
    schemas use (see ``test_patterns_use_portable_constructs``): ``$`` also
    matches before a final newline, and ``\\d`` matches any Unicode digit. This
    keyword corrects both, so the oracle is the standard's behaviour.
    """
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError

    def pattern(validator: Any, expected: str, instance: Any, _schema: Any) -> Any:
        if not validator.is_type(instance, "string"):
            return
        found = re.search(expected, instance, re.ASCII)
        if found is None or (expected.endswith("$") and found.end() != len(instance)):
            yield ValidationError(f"{instance!r} does not match {expected!r}")

    return validators.extend(Draft202012Validator, {"pattern": pattern})


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=SCHEMA_IDS)
def test_interpreter_agrees_with_jsonschema(path):
    """For generated payloads, schema_errors is None exactly when jsonschema (with
    ECMA-262 patterns) finds them valid."""
    schema = _load(path)
    validator = _ecma262_validator_class()(schema)

    @given(_near(schema))
    def check(payload: Any) -> None:
        ours = schema_errors(payload, schema)
        theirs = validator.is_valid(payload)
        assert (ours is None) == theirs, f"interpreter says {ours!r}, jsonschema {theirs}"

    check()


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=SCHEMA_IDS)
def test_predicate_agrees_with_jsonschema(path):
    """The compiled predicate says yes exactly when jsonschema does, both ways."""
    schema = _load(path)
    conforms = predicate(schema)
    validator = _ecma262_validator_class()(schema)

    @given(_near(schema))
    def check(payload: Any) -> None:
        assert conforms(payload) == validator.is_valid(payload)

    check()


class TestPredicate:
    """The compiled predicate on the keyword cases, and what its source can hold."""

    @pytest.mark.parametrize(
        ("schema", "value", "expected"),
        [
            ({"const": True}, 1, False),
            ({"enum": [1, 2]}, True, False),
            ({"enum": [True, 1]}, 1, True),
            ({"enum": ["a", "b"]}, "b", True),
            ({"enum": ["a", "b"]}, ["a"], False),
            ({"type": "integer", "minimum": 0}, float("nan"), False),
            ({"type": "number", "minimum": 0}, float("nan"), True),
            ({"minimum": 0}, -1, False),
            ({"minimum": 0}, "x", True),
            ({"type": "array", "minItems": 1, "items": {"type": "integer"}}, [], False),
            ({"type": "array", "maxItems": 1}, [1, 2], False),
            ({"type": "array", "items": {"type": "integer"}}, [1, "x"], False),
            ({"anyOf": [{"type": "string", "minLength": 2}, {"type": "null"}]}, "a", False),
            ({"anyOf": [{"type": "string", "minLength": 2}, {"type": "null"}]}, None, True),
            ({"additionalProperties": {"type": "integer"}}, {"a": "x"}, False),
            ({"additionalProperties": False, "properties": {"a": {}}}, {"b": 1}, False),
            ({"required": ["a"]}, {}, False),
            ({"required": ["a"]}, [], True),
            ({"pattern": "^a$"}, "a\n", False),
            ({"maxLength": 2}, "abc", False),
        ],
    )
    def test_keywords(self, schema, value, expected):
        """Each keyword answers as JSON Schema does (NaN is no integer and compares
        false, as in the interpreter)."""
        assert predicate(schema)(value) is expected
        assert (events.schema_errors(value, schema) is None) is expected

    @pytest.mark.parametrize(
        ("schema", "value"),
        [
            ({"type": "array", "items": {}}, [1, "x"]),
            ({"additionalProperties": {}}, {"a": 1}),
            ({"items": {"description": "anything"}}, [None]),
            ({"properties": {"a": {"title": "no keywords that check"}}}, {"a": 1}),
            ({"additionalProperties": {"description": "free"}, "properties": {}}, {"b": []}),
        ],
    )
    def test_subschemas_that_check_nothing_compile(self, schema, value):
        """A sub-schema with nothing to check still makes valid source, and accepts."""
        assert predicate(schema)(value) is True

    def test_a_schema_that_cannot_compile_is_left_to_the_interpreter(self, monkeypatch):
        """Should compiling fail, the steps alone answer, with their messages."""

        def broken(_schema: object) -> object:
            raise SyntaxError("cannot compile")

        monkeypatch.setattr(events, "predicate", broken)
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        for _ in range(events._FAST_AFTER + 2):
            assert schema_errors({"n": 1}, schema) is None
        assert schema_errors({"n": "x"}, schema) == "$.n: expected integer"

    def test_names_cannot_inject_code(self):
        """Property names with quotes, braces and newlines stay data."""
        name = "a'\"\n{x}\\); import os #"
        schema = {
            "type": "object",
            "required": [name],
            "additionalProperties": False,
            "properties": {name: {"type": "string", "pattern": "^'$"}},
        }
        assert predicate(schema)({name: "'"}) is True
        assert predicate(schema)({name: "x"}) is False

    def test_a_pattern_remembers_what_it_matched_and_still_refuses_the_rest(self):
        """Strings a pattern matched are remembered (a set lookup, not a search), and
        only those: a near miss, a string past what is kept, a subclass all answer right."""

        class Text(str):
            __slots__ = ()

        conforms = predicate({"type": "string", "pattern": "^a[0-9]+$"})
        for n in range(3 * schemacode._SEEN_KEPT):
            assert conforms(f"a{n}") is True
            assert conforms(f"a{n}") is True
            assert conforms(f"a{n}\n") is False
            assert conforms(f"b{n}") is False
        assert conforms(Text("a1")) is True
        assert conforms(Text("a")) is False
        assert conforms("a") is False

    def test_warm_schema_still_names_the_field(self):
        """Once a schema is checked often enough to use its predicate, a bad payload
        still gets the interpreter's message."""
        schema = load_schema("budget.record_call")
        for _ in range(events._FAST_AFTER + 2):
            assert schema_errors(RECORD_CALL, schema) is None
        assert events._FAST[id(schema)][1] is not None
        assert schema_errors({**RECORD_CALL, "actual_micros": -1}, schema) == (
            "$.actual_micros: below 0"
        )


class TestInterpreter:
    """The subset's rules, one keyword at a time."""

    def test_valid_payload(self):
        """A payload with every required field of the right type is valid."""
        assert schema_errors(RECORD_CALL, load_schema("budget.record_call")) is None

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"provider": ...}, "$: missing required field 'provider'"),
            ({"extra": 1}, "$: unexpected field 'extra'"),
            ({"provider": "OpenAI"}, "$.provider: does not match"),
            ({"actual_micros": -1}, "$.actual_micros: below 0"),
            ({"actual_micros": "1"}, "$.actual_micros: expected integer"),
            ({"actual_micros": True}, "$.actual_micros: expected integer"),
            ({"settled": 0}, "$.settled: expected boolean"),
            ({"verdict_ref": "abc"}, "$.verdict_ref: does not match"),
            ({"model_id": "x" * 257}, "$.model_id: longer than 256"),
            ({"input_tokens": [1]}, "$.input_tokens: expected integer or null"),
        ],
    )
    def test_first_error_names_the_field(self, change, message):
        """The first failure is reported with a JSON path to the field."""
        payload = dict(RECORD_CALL)
        for name, value in change.items():
            if value is ...:
                del payload[name]
            else:
                payload[name] = value
        problem = schema_errors(payload, load_schema("budget.record_call"))
        assert problem is not None
        assert problem.startswith(message)

    def test_integral_float_is_not_an_integer(self):
        """1.0 is not an integer here (jsonschema says it is): money is never a float."""
        payload = {**RECORD_CALL, "actual_micros": 1000.0}
        # actual_micros is integer-or-null (SPEC §7: null for an unpriced call).
        assert schema_errors(payload, load_schema("budget.record_call")) == (
            "$.actual_micros: expected integer or null"
        )

    def test_const_enum_json_equality(self):
        """const and enum compare as JSON: true is not 1, 1 is 1."""
        assert schema_errors(1, {"const": True}) is not None
        assert schema_errors(True, {"enum": [1, 2]}) is not None
        assert schema_errors(1, {"enum": [True, 1]}) is None
        assert schema_errors(False, {"const": False}) is None

    def test_any_of_items_and_counts(self):
        """anyOf, items, minItems, maxItems, minLength and maximum behave as in JSON Schema."""
        schema = {
            "type": "array",
            "minItems": 1,
            "maxItems": 2,
            "items": {
                "anyOf": [{"type": "string", "minLength": 2}, {"type": "integer", "maximum": 5}]
            },
        }
        assert schema_errors(["ab", 5], schema) is None
        assert schema_errors([], schema) == "$: fewer than 1 items"
        assert schema_errors(["ab", "cd", "ef"], schema) == "$: more than 2 items"
        assert schema_errors(["a"], schema) == "$[0]: matches none of the allowed shapes"
        assert schema_errors([6], schema) == "$[0]: matches none of the allowed shapes"

    def test_additional_properties_schema(self):
        """additionalProperties as a schema validates the extra fields."""
        schema = {"type": "object", "additionalProperties": {"type": "integer"}}
        assert schema_errors({"a": 1}, schema) is None
        assert schema_errors({"a": "x"}, schema) == "$.a: expected integer"

    def test_validate_payload_raises_with_event_type(self):
        """validate_payload raises SchemaValidationError naming the event type and field."""
        with pytest.raises(
            SchemaValidationError, match=r"budget\.record_call payload: \$: missing"
        ):
            validate_payload("budget.record_call", {}, load_schema("budget.record_call"))

    @pytest.mark.parametrize(
        ("field", "value"),
        [("provider", "openai\n"), ("utc_day", "2026-11-22\n"), ("utc_day", "２０２６-１１-２２")],
        ids=["provider-newline", "day-newline", "day-fullwidth-digits"],
    )
    def test_patterns_follow_ecma262(self, field, value):
        """A trailing newline or non-ASCII digits do not satisfy an anchored ASCII pattern."""
        payload = {**RECORD_CALL, field: value}
        assert schema_errors(payload, load_schema("budget.record_call")) is not None
