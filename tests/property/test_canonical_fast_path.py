"""Property: our fast canonical path produces exactly RFC 8785's bytes."""

import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.canonical import _plain, canonical_bytes

SAFE = 2**53 - 1
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-SAFE, max_value=SAFE)
    | st.text()
    | st.text(alphabet=st.characters(max_codepoint=0x7F))
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(values)
def test_canonical_bytes_equal_rfc8785(value):
    """For every float-free JSON value, canonical_bytes == rfc8785.dumps."""
    assert canonical_bytes(value) == rfc8785.dumps(value)


class _Text(str):
    __slots__ = ()


class _Number(int):
    __slots__ = ()


MAX = 2**53 - 1
anything = st.recursive(
    scalars
    | st.floats(allow_nan=False)
    | st.integers()
    | st.sampled_from([MAX, MAX + 1, -MAX, -MAX - 1, _Text("x"), _Number(1)]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3) | st.integers(0, 3), inner, max_size=4)
    ),
    max_leaves=20,
)


def plain(value: object) -> bool:
    """What the fast path takes: str-keyed dicts, lists, str, bool, None, safe ints (exact types)."""
    kind = type(value)
    if kind in (str, bool) or value is None:
        return True
    if kind is int:
        return -MAX <= value <= MAX  # type: ignore[operator]
    if kind is dict:
        return all(type(k) is str and plain(v) for k, v in value.items())  # type: ignore[attr-defined]
    if kind is list:
        return all(plain(item) for item in value)  # type: ignore[attr-defined]
    return False


@given(anything)
def test_the_fast_path_takes_exactly_the_plain_values(value):
    """Floats, unsafe integers, subclasses, tuples and non-string keys all take the full scheme."""
    assert _plain(value) == plain(value)
