"""Payload validation against the JSON Schemas in ``schemas/``.

The schemas are the source of truth and are written in a small subset of JSON
Schema (draft 2020-12): ``type``, ``properties``, ``required``,
``additionalProperties`` (boolean or a schema), ``enum``, ``const``, ``pattern``,
``minimum``, ``maximum``, ``minLength``, ``maxLength``, ``items``, ``minItems``,
``maxItems``, ``anyOf``. Every ``ledger`` call seals an envelope, and importing
``jsonschema`` costs more than the whole hot path may (about 100 ms here), so
payloads are checked by this interpreter of the subset. The test suite checks
that every schema uses only this subset, that ``jsonschema`` accepts each schema,
and that both validators agree on generated payloads.
"""

import re
from functools import lru_cache
from typing import Any

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

_TYPE_CHECKS = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


@lru_cache(maxsize=128)
def _regex(pattern: str) -> re.Pattern[str]:
    # JSON Schema patterns are ECMA-262: "$" matches only at the very end (Python's
    # also matches before a final newline) and "\d" is ASCII only.
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern, re.ASCII)


def _equal(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1 (Python says True == 1).
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def schema_errors(value: Any, schema: dict[str, Any], path: str = "$") -> str | None:
    """The first way ``value`` fails ``schema``, or ``None`` if it conforms."""
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_TYPE_CHECKS[k](value) for k in kinds):
            return f"{path}: expected {' or '.join(kinds)}"
    if "const" in schema and not _equal(value, schema["const"]):
        return f"{path}: must be {schema['const']!r}"
    if "enum" in schema and not any(_equal(value, option) for option in schema["enum"]):
        return f"{path}: must be one of {schema['enum']!r}"
    if "anyOf" in schema and all(
        schema_errors(value, option, path) is not None for option in schema["anyOf"]
    ):
        return f"{path}: matches none of the allowed shapes"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{path}: shorter than {schema['minLength']}"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{path}: longer than {schema['maxLength']}"
        if "pattern" in schema and not _regex(schema["pattern"]).search(value):
            return f"{path}: does not match {schema['pattern']!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path}: below {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path}: above {schema['maximum']}"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{path}: fewer than {schema['minItems']} items"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{path}: more than {schema['maxItems']} items"
        if "items" in schema:
            for index, item in enumerate(value):
                problem = schema_errors(item, schema["items"], f"{path}[{index}]")
                if problem:
                    return problem
    if isinstance(value, dict):
        return _object_errors(value, schema, path)
    return None


def _object_errors(value: dict[str, Any], schema: dict[str, Any], path: str) -> str | None:
    for name in schema.get("required", ()):
        if name not in value:
            return f"{path}: missing required field {name!r}"
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            problem = schema_errors(item, properties[name], f"{path}.{name}")
        elif extra is False:
            problem = f"{path}: unexpected field {name!r}"
        elif isinstance(extra, dict):
            problem = schema_errors(item, extra, f"{path}.{name}")
        else:
            problem = None
        if problem:
            return problem
    return None


def validate_payload(event_type: str, payload: dict[str, Any], schema: dict[str, Any]) -> None:
    """Check a payload against its event type's schema before it is sealed.

    Raises:
        SchemaValidationError: the payload does not conform; names the field.
    """
    problem = schema_errors(payload, schema)
    if problem is not None:
        raise SchemaValidationError(f"{event_type} payload: {problem}")
