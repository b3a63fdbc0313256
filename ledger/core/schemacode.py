"""A schema of the supported subset turned into one Python function that says yes or no.

Every sealed entry's payload is checked, so the check is on every call's path.
Walking the schema, or calling one closure per keyword, costs more than the
question needs when the answer is nearly always yes. This module writes the
schema out as straight-line Python (``isinstance`` tests, bound regular
expressions, a set test for closed objects) and compiles it once. It answers
only *whether* a value conforms; ``ledger.core.events`` asks its keyword
interpreter for the message when the answer is no, so both must agree, and the
tests check that they do on generated values.

Nothing from a schema is written into the source text except through
``repr`` of a string or a name bound in the function's namespace, so a schema
cannot inject code.
"""

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

Predicate = Callable[[Any], bool]

_TYPE_TESTS = {
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "string": "isinstance({v}, str)",
    "integer": "(isinstance({v}, int) and not isinstance({v}, bool))",
    "number": "(isinstance({v}, (int, float)) and not isinstance({v}, bool))",
    "boolean": "isinstance({v}, bool)",
    "null": "{v} is None",
}


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON means it: ``true`` is not ``1`` (Python says ``True == 1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


@lru_cache(maxsize=128)
def json_regex(pattern: str) -> re.Pattern[str]:
    """A ``pattern`` keyword compiled with its JSON Schema meaning.

    JSON Schema patterns are ECMA-262: ``$`` matches only at the very end
    (Python's also matches before a final newline) and ``\\d`` is ASCII only.
    """
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern, re.ASCII)


class _Writer:
    """Source lines and the constants they name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = {"_equal": json_equal, "_MISSING": _MISSING}
        self._count = 0

    def fresh(self, stem: str) -> str:
        self._count += 1
        return f"{stem}{self._count}"

    def bind(self, stem: str, value: Any) -> str:
        name = self.fresh(f"_{stem}")
        self.names[name] = value
        return name

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def fail_unless(self, depth: int, condition: str) -> None:
        self.emit(depth, f"if not ({condition}):")
        self.emit(depth + 1, "return False")

    def node(self, schema: dict[str, Any], v: str, depth: int) -> None:
        """Lines that return False when the value in variable ``v`` fails ``schema``."""
        kind = schema.get("type")
        if kind is not None:
            kinds = kind if isinstance(kind, list) else [kind]
            self.fail_unless(depth, " or ".join(_TYPE_TESTS[k].format(v=v) for k in kinds))
        if "const" in schema:
            self.fail_unless(depth, f"_equal({v}, {self.bind('const', schema['const'])})")
        if "enum" in schema:
            self._enum(schema["enum"], v, depth)
        if "anyOf" in schema:
            options = [self.bind("option", predicate(option)) for option in schema["anyOf"]]
            self.fail_unless(depth, " or ".join(f"{option}({v})" for option in options))
        self._string(schema, v, depth)
        self._number(schema, v, depth)
        self._array(schema, v, depth)
        self._object(schema, v, depth)

    def _enum(self, options: list[Any], v: str, depth: int) -> None:
        if options and all(type(option) is str for option in options):
            # A string equals a JSON string option exactly when it is in the set.
            members = self.bind("enum", frozenset(options))
            self.fail_unless(depth, f"isinstance({v}, str) and {v} in {members}")
            return
        bound = self.bind("enum", list(options))
        self.fail_unless(depth, f"any(_equal({v}, option) for option in {bound})")

    def _bounds(self, schema: dict[str, Any], low: str, high: str, measured: str) -> list[str]:
        # Written as "not <" and "not >", as the interpreter compares: a NaN passes both.
        tests = []
        if low in schema:
            tests.append(f"not {measured} < {self.bind('low', schema[low])}")
        if high in schema:
            tests.append(f"not {measured} > {self.bind('high', schema[high])}")
        return tests

    def _string(self, schema: dict[str, Any], v: str, depth: int) -> None:
        tests = self._bounds(schema, "minLength", "maxLength", f"len({v})")
        if "pattern" in schema:
            seen, matches = _remembering(json_regex(schema["pattern"]))
            tests.append(
                f"({v} in {self.bind('seen', seen)} or {self.bind('matches', matches)}({v}))"
            )
        if tests:
            self.emit(depth, f"if isinstance({v}, str):")
            self.fail_unless(depth + 1, " and ".join(tests))

    def _number(self, schema: dict[str, Any], v: str, depth: int) -> None:
        tests = self._bounds(schema, "minimum", "maximum", v)
        if tests:
            self.emit(depth, f"if isinstance({v}, (int, float)) and not isinstance({v}, bool):")
            self.fail_unless(depth + 1, " and ".join(tests))

    def _array(self, schema: dict[str, Any], v: str, depth: int) -> None:
        tests = self._bounds(schema, "minItems", "maxItems", f"len({v})")
        if not tests and "items" not in schema:
            return
        self.emit(depth, f"if isinstance({v}, list):")
        if tests:
            self.fail_unless(depth + 1, " and ".join(tests))
        if "items" in schema:
            item = self.fresh("item")
            self.emit(depth + 1, f"for {item} in {v}:")
            self.emit(depth + 2, "pass")  # an items schema that asks nothing writes no lines
            self.node(schema["items"], item, depth + 2)

    def _object(self, schema: dict[str, Any], v: str, depth: int) -> None:
        required = list(schema.get("required", ()))
        properties: dict[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        if not required and not properties and extra is True:
            return
        self.emit(depth, f"if isinstance({v}, dict):")
        inner = depth + 1
        self.emit(inner, "pass")
        if required:
            self.fail_unless(inner, " and ".join(f"{name!r} in {v}" for name in required))
        known = self.bind("known", frozenset(properties))
        if extra is False:
            self.fail_unless(inner, f"{known}.issuperset({v})")
        elif isinstance(extra, dict):
            name, item = self.fresh("name"), self.fresh("item")
            self.emit(inner, f"for {name}, {item} in {v}.items():")
            self.emit(inner + 1, f"if {name} not in {known}:")
            self.emit(inner + 2, "pass")
            self.node(extra, item, inner + 2)
        for name, item_schema in properties.items():
            item = self.fresh("value")
            self.emit(inner, f"{item} = {v}.get({name!r}, _MISSING)")
            self.emit(inner, f"if {item} is not _MISSING:")
            self.emit(inner + 1, "pass")
            self.node(item_schema, item, inner + 1)


# Strings a pattern has matched, per compiled predicate: payloads repeat the same
# names, periods and period bounds, and a set lookup costs a fraction of a search.
_SEEN_KEPT = 256


def _remembering(regex: re.Pattern[str]) -> tuple[set[str], Predicate]:
    """A set of strings ``regex`` matched, and a test that searches and remembers."""
    seen: set[str] = set()
    search = regex.search

    def matches(value: str) -> bool:
        if search(value) is None:
            return False
        if type(value) is str:  # a subclass may compare in its own way: never remembered
            if len(seen) >= _SEEN_KEPT:
                seen.clear()
            seen.add(value)
        return True

    return seen, matches


class _Missing:
    __slots__ = ()


_MISSING = _Missing()


def predicate(schema: dict[str, Any]) -> Predicate:
    """``schema`` as one compiled function: ``True`` exactly when a value conforms."""
    writer = _Writer()
    writer.emit(0, "def conforms(value):")
    writer.node(schema, "value", 1)
    writer.emit(1, "return True")
    namespace = dict(writer.names)
    exec(compile("\n".join(writer.lines), "<schema>", "exec"), namespace)  # noqa: S102 - see module docstring
    conforms: Predicate = namespace["conforms"]
    return conforms
