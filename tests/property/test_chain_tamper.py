"""Property: any single tampering of a valid chain is detected, at the right line.

A valid chain of 2-30 entries is taken as a prefix of one fixed chain; each test
applies one kind of damage and computes, from the damage alone, which line
``verify-chain`` must name. Verification runs in memory (``verify_lines``) and
checkpoints are compared the way the service compares them.
"""

from hypothesis import given
from hypothesis import strategies as st

from ledger.core.envelope import GENESIS
from tests.helpers.chains import (
    build_chain,
    checkpoint_of,
    entry_hash,
    lines_of,
    moment,
    signer,
    trust_for,
    verify_with_checkpoint,
)

KEY = signer(1)
SECOND = signer(2)  # trusted too: may legitimately sign
STRANGER = signer(3)  # not trusted
TRUST = trust_for(KEY, SECOND)
MAX = 30
BASE = lines_of(build_chain(MAX, KEY))

sizes = st.integers(min_value=2, max_value=MAX)


def _split(data: bytes) -> list[bytes]:
    """Lines as a file reader sees them: split after each ``\\n``."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _failure(lines: list[bytes], checkpoint=None) -> int | None:
    outcome = verify_with_checkpoint(lines, TRUST, checkpoint)
    if outcome is None:
        return None
    line, reason = outcome
    assert reason
    return line


@given(sizes)
def test_untouched_prefix_verifies(size):
    """Every prefix of a valid chain is itself a valid chain."""
    assert _failure(BASE[:size]) is None


@given(sizes, st.data())
def test_byte_edit_detected_at_edited_line(size, data):
    """Changing any one byte (bit flip or any value) fails at the line holding that byte.

    This includes bytes outside the hashed and signed bytes (the signature's own
    base64: only its canonical encoding verifies) and digits of ts_utc that make an
    impossible time (reported, not raised).
    """
    lines = BASE[:size]
    blob = bytearray(b"".join(lines))
    offset = data.draw(st.integers(min_value=0, max_value=len(blob) - 1), label="offset")
    old = blob[offset]
    new = data.draw(
        st.one_of(
            st.integers(min_value=0, max_value=7).map(lambda bit: old ^ (1 << bit)),
            st.integers(min_value=0, max_value=255),
        ),
        label="new byte",
    )
    blob[offset] = new
    edited = _split(bytes(blob))
    line = blob.count(b"\n", 0, offset) + 1
    if new == old:
        assert _failure(edited) is None
        return
    assert _failure(edited) == line


@given(sizes, st.data())
def test_deleted_line(size, data):
    """Deleting line k fails at line k; the last line's loss shows only with a checkpoint."""
    lines = BASE[:size]
    k = data.draw(st.integers(min_value=1, max_value=size), label="k")
    damaged = lines[: k - 1] + lines[k:]
    assert _failure(damaged) == (None if k == size else k)
    assert _failure(damaged, checkpoint_of(lines, KEY)) == k


@given(sizes, st.data())
def test_inserted_copy(size, data):
    """A copy of line j inserted as line k fails at k, or at k+1 when it lands just before j."""
    lines = BASE[:size]
    j = data.draw(st.integers(min_value=1, max_value=size), label="copy of line")
    k = data.draw(st.integers(min_value=1, max_value=size + 1), label="inserted as line")
    damaged = [*lines[: k - 1], lines[j - 1], *lines[k - 1 :]]
    assert _failure(damaged) == (k + 1 if k == j else k)


@given(sizes, st.data())
def test_inserted_foreign_entry(size, data):
    """A validly signed entry inserted as line k: fails at k if its key is untrusted or its
    link is wrong; if trusted and linked it fails at k+1, or is a legitimate append at the end."""
    lines = BASE[:size]
    k = data.draw(st.integers(min_value=1, max_value=size + 1), label="inserted as line")
    key = data.draw(st.sampled_from([KEY, SECOND, STRANGER]), label="key")
    linked = data.draw(st.booleans(), label="linked")
    prev = (entry_hash(lines[k - 2]) if k > 1 else GENESIS) if linked else "f" * 64
    foreign = build_chain(
        1,
        key,
        start=moment(data.draw(st.integers(min_value=0, max_value=MAX), label="time")),
        prev_hash=None if prev == GENESIS else prev,
        first_index=500,
    )[0].line
    damaged = [*lines[: k - 1], foreign, *lines[k - 1 :]]
    if key is STRANGER or not linked:
        expected: int | None = k
    else:
        expected = k + 1 if k <= size else None
    assert _failure(damaged) == expected
    assert _failure(damaged, checkpoint_of(lines, KEY)) == expected


@given(sizes, st.data())
def test_swapped_lines(size, data):
    """Swapping lines i < j fails at line i."""
    lines = list(BASE[:size])
    i = data.draw(st.integers(min_value=1, max_value=size - 1), label="i")
    j = data.draw(st.integers(min_value=i + 1, max_value=size), label="j")
    lines[i - 1], lines[j - 1] = lines[j - 1], lines[i - 1]
    assert _failure(lines) == i


@given(sizes, st.data())
def test_truncation_with_checkpoint(size, data):
    """Cut to m lines, a checkpoint of c entries fails at line m+1 when m < c, else passes."""
    lines = BASE[:size]
    c = data.draw(st.integers(min_value=1, max_value=size), label="checkpoint entries")
    m = data.draw(st.integers(min_value=0, max_value=size - 1), label="kept lines")
    checkpoint = checkpoint_of(lines, KEY, c)
    assert _failure(lines[:m]) is None
    assert _failure(lines[:m], checkpoint) == (m + 1 if m < c else None)


@given(sizes, st.data())
def test_truncation_then_reappend_with_valid_key(size, data):
    """Cut to m < c lines and re-grown by r valid entries: fails at the first missing line,
    at entry c (it differs), or at line 1 when even the first entry was replaced."""
    lines = BASE[:size]
    c = data.draw(st.integers(min_value=1, max_value=size), label="checkpoint entries")
    m = data.draw(st.integers(min_value=0, max_value=c - 1), label="kept lines")
    r = data.draw(st.integers(min_value=1, max_value=6), label="re-appended")
    key = data.draw(st.sampled_from([KEY, SECOND]), label="key")
    kept = lines[:m]
    regrown = kept + lines_of(
        build_chain(
            r,
            key,
            prev_hash=entry_hash(kept[-1]) if kept else None,
            first_index=1000 + m,
        )
    )
    assert _failure(regrown) is None  # without a checkpoint nothing shows
    total = m + r
    if m == 0:
        expected = 1
    elif total < c:
        expected = total + 1
    else:
        expected = c
    assert _failure(regrown, checkpoint_of(lines, KEY, c)) == expected
