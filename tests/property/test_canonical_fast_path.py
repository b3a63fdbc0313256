"""Property: our fast canonical path produces exactly RFC 8785's bytes."""

import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.canonical import canonical_bytes

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
