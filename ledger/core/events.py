"""Payload validation against the JSON Schemas in ``schemas/``.

The schemas are the source of truth and are written in a small subset of JSON
Schema (draft 2020-12): ``type``, ``properties``, ``required``,
``additionalProperties`` (boolean or a schema), ``enum``, ``const``, ``pattern``,
``minimum``, ``maximum``, ``minLength``, ``maxLength``, ``items``, ``minItems``,
``maxItems``, ``anyOf``. Every ``ledger`` call seals an envelope, and importing
``jsonschema`` costs more than the whole hot path may (about 100 ms here), so
payloads are checked by this small compiler of the subset. The test suite checks
that every schema uses only this subset, that ``jsonschema`` accepts each schema,
and that both validators agree on generated payloads.
"""

from collections.abc import Callable
from typing import Any

from ledger.core.schemacode import json_equal as _equal
from ledger.core.schemacode import json_regex as _regex
from ledger.core.schemacode import predicate
from ledger.errors import SchemaValidationError

SUPPORTED_KEYWORDS = frozenset(
    {
        "$schema",
        "$id",
        "title",
        "description",
        "type",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "const",
        "pattern",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "items",
        "minItems",
        "maxItems",
        "anyOf",
    }
)

_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def schema_errors(value: Any, schema: dict[str, Any], path: str = "$") -> str | None:
    """The first way ``value`` fails ``schema``, or ``None`` if it conforms."""
    known = _FAST.get(id(schema))
    if known is not None and known[0] is schema:
        conforms = known[1]
        if conforms is not None:
            if conforms(value):
                return None
        elif known[2] >= _FAST_AFTER:
            _FAST[id(schema)] = (schema, _predicate_or_never(schema), 0)
        else:
            _FAST[id(schema)] = (schema, None, known[2] + 1)
    else:
        if len(_FAST) >= _COMPILED_KEPT:
            _FAST.clear()
        _FAST[id(schema)] = (schema, None, 1)
    # The steps name what is wrong, and have the last word: a predicate that
    # said no too eagerly would cost only time.
    return _compiled(schema)(value, path)


def _never(_value: Any) -> bool:
    return False


def _predicate_or_never(schema: dict[str, Any]) -> "Callable[[Any], bool]":
    # A schema the predicate writer cannot compile is left to the steps alone.
    try:
        return predicate(schema)
    except (SyntaxError, RecursionError, MemoryError):
        return _never


# Compiling a schema's predicate (``ledger.core.schemacode``) takes about 2 ms,
# more than a one-shot process saves with it; a process that has checked the
# same schema this often is a long-lived one (the resident gate, an SDK guard).
_FAST_AFTER = 3
_FAST: dict[int, tuple[dict[str, Any], "Callable[[Any], bool] | None", int]] = {}


Check = Callable[[Any, str], "str | None"]
_COMPILED: dict[int, tuple[dict[str, Any], Check]] = {}
_COMPILED_KEPT = 1024


def _compiled(schema: dict[str, Any]) -> Check:
    """``schema`` turned into one function, built on first use.

    Walking the schema for every payload cost more than signing it; the
    function asks only what the schema says. Kept by the schema object's
    identity (schemas are loaded once and never changed); the schema itself is
    kept beside it, so its id cannot be reused while the entry lives.
    """
    known = _COMPILED.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    check = _compile(schema)
    if len(_COMPILED) >= _COMPILED_KEPT:
        _COMPILED.clear()
    _COMPILED[id(schema)] = (schema, check)
    return check


def _compile(schema: dict[str, Any]) -> Check:
    steps = [
        step
        for step in (
            _type_step(schema),
            _value_step(schema),
            _any_of_step(schema),
            _string_step(schema),
            _number_step(schema),
            _array_step(schema),
            _object_step(schema),
        )
        if step is not None
    ]
    if len(steps) == 1:
        return steps[0]

    def check(value: Any, path: str) -> str | None:
        for step in steps:
            problem = step(value, path)
            if problem is not None:
                return problem
        return None

    return check


def _type_step(schema: dict[str, Any]) -> Check | None:
    kind = schema.get("type")
    if kind is None:
        return None
    kinds = kind if isinstance(kind, list) else [kind]
    tests = [_TYPE_CHECKS[name] for name in kinds]
    expected = " or ".join(kinds)

    def check(value: Any, path: str) -> str | None:
        if any(test(value) for test in tests):
            return None
        return f"{path}: expected {expected}"

    return check


def _value_step(schema: dict[str, Any]) -> Check | None:
    has_const, const = "const" in schema, schema.get("const")
    options = schema.get("enum")
    if not has_const and options is None:
        return None

    def check(value: Any, path: str) -> str | None:
        if has_const and not _equal(value, const):
            return f"{path}: must be {const!r}"
        if options is not None and not any(_equal(value, option) for option in options):
            return f"{path}: must be one of {options!r}"
        return None

    return check


def _any_of_step(schema: dict[str, Any]) -> Check | None:
    if "anyOf" not in schema:
        return None
    options = [_compiled(option) for option in schema["anyOf"]]

    def check(value: Any, path: str) -> str | None:
        if all(option(value, path) is not None for option in options):
            return f"{path}: matches none of the allowed shapes"
        return None

    return check


def _string_step(schema: dict[str, Any]) -> Check | None:
    low, high, pattern = schema.get("minLength"), schema.get("maxLength"), schema.get("pattern")
    if low is None and high is None and pattern is None:
        return None
    regex = None if pattern is None else _regex(pattern)

    def check(value: Any, path: str) -> str | None:
        if not isinstance(value, str):
            return None
        if low is not None and len(value) < low:
            return f"{path}: shorter than {low}"
        if high is not None and len(value) > high:
            return f"{path}: longer than {high}"
        if regex is not None and not regex.search(value):
            return f"{path}: does not match {pattern!r}"
        return None

    return check


def _number_step(schema: dict[str, Any]) -> Check | None:
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is None and high is None:
        return None

    def check(value: Any, path: str) -> str | None:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        if low is not None and value < low:
            return f"{path}: below {low}"
        if high is not None and value > high:
            return f"{path}: above {high}"
        return None

    return check


def _array_step(schema: dict[str, Any]) -> Check | None:
    low, high = schema.get("minItems"), schema.get("maxItems")
    items = None if "items" not in schema else _compiled(schema["items"])
    if low is None and high is None and items is None:
        return None

    def check(value: Any, path: str) -> str | None:
        if not isinstance(value, list):
            return None
        if low is not None and len(value) < low:
            return f"{path}: fewer than {low} items"
        if high is not None and len(value) > high:
            return f"{path}: more than {high} items"
        if items is not None:
            for index, item in enumerate(value):
                problem = items(item, f"{path}[{index}]")
                if problem:
                    return problem
        return None

    return check


def _object_step(schema: dict[str, Any]) -> Check | None:
    required = tuple(schema.get("required", ()))
    properties = {name: _compiled(item) for name, item in schema.get("properties", {}).items()}
    extra = schema.get("additionalProperties", True)
    rest = _compiled(extra) if isinstance(extra, dict) else None
    closed = extra is False
    if not required and not properties and rest is None and not closed:
        return None

    def check(value: Any, path: str) -> str | None:
        if not isinstance(value, dict):
            return None
        for name in required:
            if name not in value:
                return f"{path}: missing required field {name!r}"
        for name, item in value.items():
            known = properties.get(name)
            if known is not None:
                problem = known(item, f"{path}.{name}")
            elif closed:
                problem = f"{path}: unexpected field {name!r}"
            elif rest is not None:
                problem = rest(item, f"{path}.{name}")
            else:
                problem = None
            if problem:
                return problem
        return None

    return check


def validate_payload(event_type: str, payload: dict[str, Any], schema: dict[str, Any]) -> None:
    """Check a payload against its event type's schema before it is sealed.

    Raises:
        SchemaValidationError: the payload does not conform; names the field.
    """
    problem = schema_errors(payload, schema)
    if problem is not None:
        raise SchemaValidationError(f"{event_type} payload: {problem}")
