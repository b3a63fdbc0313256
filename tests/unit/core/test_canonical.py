"""ledger.core.canonical: the one producer of RFC 8785 bytes."""

import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.canonical import canonical_bytes, sha256_hex
from ledger.errors import CanonicalizationError, LedgerError

# JSON values without floats: what a payload may hold.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


class TestFloatsRefused:
    @pytest.mark.parametrize(
        "value",
        [1.5, 1.0, {"a": 0.1}, [1, [2, 3.0]], {"a": {"b": [{"c": -0.0}]}}],
    )
    def test_float_anywhere_is_refused(self, value):
        """A float at any depth raises CanonicalizationError: money is integer micro-USD."""
        with pytest.raises(CanonicalizationError, match="float"):
            canonical_bytes(value)

    def test_error_names_the_path(self):
        """The error names where the float is, so the payload can be fixed."""
        with pytest.raises(CanonicalizationError, match=r"\$\.payload\.usd"):
            canonical_bytes({"payload": {"usd": 1.25}})

    def test_allow_floats_for_foreign_entries(self):
        """allow_floats hashes other writers' numbers per RFC 8785 (1.0 -> 1, 1e21 -> 1e+21)."""
        assert canonical_bytes({"a": 1.0, "b": 1e21, "c": 0.5}, allow_floats=True) == (
            b'{"a":1,"b":1e+21,"c":0.5}'
        )

    def test_canonicalization_error_is_a_ledger_error(self):
        """The error is a LedgerError, so the CLI reports it as one line."""
        assert issubclass(CanonicalizationError, LedgerError)


class TestUnrepresentable:
    @pytest.mark.parametrize("value", [2**53, -(2**53), {"a": 10**20}])
    def test_integer_outside_ieee754_exact_range(self, value):
        """Integers beyond ±(2**53 - 1) cannot be represented exactly and are refused."""
        with pytest.raises(CanonicalizationError):
            canonical_bytes(value)

    @pytest.mark.parametrize("value", [{1, 2}, b"bytes", object(), {"a": (1 + 2j)}])
    def test_non_json_types(self, value):
        """Values that are not JSON raise CanonicalizationError, not a raw TypeError."""
        with pytest.raises(CanonicalizationError):
            canonical_bytes(value)

    def test_edge_of_exact_range_is_accepted(self):
        """±(2**53 - 1) are exact and serialize as plain integers."""
        assert canonical_bytes([2**53 - 1, -(2**53) + 1]) == b"[9007199254740991,-9007199254740991]"


class TestForm:
    def test_keys_sorted_and_no_whitespace(self):
        """Keys are sorted, separators carry no whitespace, output is UTF-8."""
        assert canonical_bytes({"b": 1, "a": [True, None, "é"]}) == (
            '{"a":[true,null,"é"],"b":1}'.encode()
        )

    def test_keys_sorted_by_utf16_code_units(self):
        """Key order is by UTF-16 code units: U+1F600 (a surrogate pair) sorts before U+E000."""
        value = {"\ue000": 1, "\U0001f600": 2, "z": 3}
        assert canonical_bytes(value) == '{"z":3,"\U0001f600":2,"\ue000":1}'.encode()

    def test_string_escapes(self):
        """Only quote, backslash and controls are escaped; controls as \\b \\t \\n \\f \\r or \\u00xx."""
        value = '"\\\b\t\n\f\r\u0001\u001f\u007f/\u2028'
        assert canonical_bytes(value) == (
            '"\\"\\\\\\b\\t\\n\\f\\r\\u0001\\u001f\u007f/\u2028"'.encode()
        )

    @given(json_values, st.randoms(use_true_random=False))
    def test_key_order_and_whitespace_are_irrelevant(self, value, rng):
        """Reordered keys and any whitespace in the source JSON give the same bytes."""
        expected = canonical_bytes(value)
        reordered = _shuffled(value, rng)
        assert canonical_bytes(reordered) == expected
        spaced = json.loads(json.dumps(reordered, indent=rng.choice([None, 1, 4])))
        assert canonical_bytes(spaced) == expected
        assert json.loads(expected) == value

    @given(json_values)
    def test_idempotent(self, value):
        """Canonicalizing the parse of canonical bytes gives the same bytes."""
        once = canonical_bytes(value)
        assert canonical_bytes(json.loads(once)) == once


class TestSha256Hex:
    def test_lowercase_hex(self):
        """sha256_hex is 64 lowercase hex digits (the prev_hash form)."""
        assert sha256_hex(b"") == (
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        )
        assert sha256_hex(b"abc").islower()
