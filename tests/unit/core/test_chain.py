"""ledger.core.chain: verifying lines (JSON, link, signature) and stitching ranges."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.chain import ChainVerifier, stitch, verify_lines
from ledger.core.envelope import GENESIS
from tests.helpers.chains import (
    build_chain,
    entry_hash,
    foreign_line,
    full_entry,
    lines_of,
    signer,
    trust_for,
)

KEY = signer(1)
STRANGER = signer(2)
TRUST = trust_for(KEY)
CHAIN = build_chain(12, KEY)
LINES = lines_of(CHAIN)


def _ranges(lines: list[bytes], cuts: list[int], trust=TRUST, **kwargs):
    bounds = [0, *cuts, len(lines)]
    reports = []
    for index in range(len(bounds) - 1):
        verifier = ChainVerifier(trust, expected_prev=GENESIS if index == 0 else None, **kwargs)
        for raw in lines[bounds[index] : bounds[index + 1]]:
            if not verifier.feed(raw):
                break
        reports.append(verifier.report())
    return reports


class TestVerifyLines:
    def test_valid_chain(self):
        """A chain sealed by a trusted key verifies; the report names genesis and head."""
        report = verify_lines(LINES, TRUST)
        assert report.ok
        assert (report.entries, report.lines, report.line, report.reason) == (12, 12, None, None)
        assert report.genesis_hash == CHAIN[0].entry_hash
        assert report.head_hash == CHAIN[-1].entry_hash
        assert report.head_ts == CHAIN[-1].ts_utc

    def test_empty_chain(self):
        """No lines is a valid chain of zero entries."""
        report = verify_lines([], TRUST)
        assert report.ok
        assert report.entries == 0
        assert report.head_hash is None

    def test_first_entry_must_link_to_genesis(self):
        """A chain whose first entry links elsewhere fails at line 1."""
        report = verify_lines(LINES[1:], TRUST)
        assert (report.ok, report.line) == (False, 1)
        assert report.reason == "first entry's prev_hash is not GENESIS"

    def test_broken_link(self):
        """An entry whose prev_hash is not the previous entry's hash fails at that line."""
        report = verify_lines([*LINES[:4], *LINES[5:]], TRUST)
        assert (report.ok, report.line, report.entries) == (False, 5, 4)
        assert report.reason == "prev_hash does not match the previous entry"

    def test_stops_at_first_failure(self):
        """Lines after the first failure are not examined; entries counts the good ones."""
        report = verify_lines([*LINES[:3], b"junk\n", b"more junk\n"], TRUST)
        assert (report.line, report.entries, report.lines) == (4, 3, 4)

    def test_torn_line(self):
        """A last line without its newline is a torn line."""
        report = verify_lines([*LINES[:3], LINES[3][:-1]], TRUST)
        assert (report.ok, report.line) == (False, 4)
        assert report.reason == "torn line (no newline at end of file)"

    def test_empty_line(self):
        """A blank line is not an entry."""
        report = verify_lines([LINES[0], b"\n", LINES[1]], TRUST)
        assert (report.line, report.reason) == (2, "empty line")

    def test_malformed_line(self):
        """A line that is not a valid envelope fails with 'malformed entry'."""
        report = verify_lines([LINES[0], b'{"a":1}\n'], TRUST)
        assert report.line == 2
        assert (report.reason or "").startswith("malformed entry: ")

    def test_impossible_time_is_a_broken_line(self):
        """A line whose ts_utc has month 13 is reported broken at that line, not raised."""
        bad = LINES[1].replace(b'"ts_utc":"2026-11', b'"ts_utc":"2026-13', 1)
        report = verify_lines([LINES[0], bad], TRUST)
        assert (report.ok, report.line) == (False, 2)

    def test_marker_line_fails_by_default(self):
        """A line beginning with '[' is an unauthenticated marker and fails."""
        report = verify_lines([LINES[0], b"[marker] rotated\n", LINES[1]], TRUST)
        assert (report.line, report.reason) == (2, "unauthenticated marker line")

    def test_marker_line_skipped_with_allow_markers(self):
        """With allow_markers a marker is skipped and not counted as an entry."""
        report = verify_lines(
            [b"[start]\n", LINES[0], b"[x]\n", *LINES[1:]], TRUST, allow_markers=True
        )
        assert report.ok
        assert (report.entries, report.lines) == (12, 14)

    def test_untrusted_signature(self):
        """An entry signed by an unknown key fails at that line."""
        report = verify_lines(LINES, trust_for(STRANGER))
        assert (report.line, report.reason) == (1, f"unknown signing key {KEY.key_id}")

    def test_unsigned_entries_and_strict(self):
        """Stripped signatures pass by default and fail under strict at the first one."""
        lines = [*LINES[:2], *(foreign_line(raw, "unsigned") for raw in LINES[2:])]
        assert verify_lines(lines, TRUST).ok
        report = verify_lines(lines, TRUST, strict=True)
        assert (report.line, report.reason) == (3, "entry is unsigned (--strict)")

    def test_link_checked_before_signature(self):
        """A line failing both link and signature reports the link (checks run in order)."""
        foreign = build_chain(1, STRANGER, prev_hash="0" * 64)[0].line
        report = verify_lines([LINES[0], foreign], TRUST)
        assert (report.line, report.reason) == (2, "prev_hash does not match the previous entry")


class TestChainVerifier:
    def test_feed_returns_false_once_broken(self):
        """After a failure, feed refuses further lines and the report does not move."""
        verifier = ChainVerifier(TRUST)
        assert verifier.feed(LINES[0])
        assert not verifier.feed(b"junk\n")
        assert verifier.broken
        assert not verifier.feed(LINES[1])
        assert verifier.report().line == 2

    def test_first_line_offsets_line_numbers(self):
        """first_line makes reported line numbers count from there."""
        verifier = ChainVerifier(TRUST, expected_prev=None, first_line=100)
        for raw in LINES[3:6]:
            verifier.feed(raw)
        verifier.feed(b"junk\n")
        report = verifier.report()
        assert (report.line, report.entries, report.first_entry_line) == (103, 3, 100)
        assert report.first_prev_hash == entry_hash(LINES[2])

    def test_expected_prev_none_accepts_any_first_link(self):
        """expected_prev=None starts a range anywhere; a later bad link still fails."""
        verifier = ChainVerifier(TRUST, expected_prev=None)
        assert all(verifier.feed(raw) for raw in LINES[5:9])
        assert verifier.report().genesis_hash is None
        assert not verifier.feed(LINES[10])

    def test_expected_prev_hash(self):
        """A range verified against a known predecessor fails if it does not link to it."""
        verifier = ChainVerifier(TRUST, expected_prev=entry_hash(LINES[3]))
        assert not verifier.feed(LINES[5])
        assert verifier.report().reason == "prev_hash does not match the previous entry"


class TestStitch:
    @given(st.lists(st.integers(min_value=1, max_value=len(LINES) - 1), max_size=5, unique=True))
    def test_stitched_ranges_equal_whole(self, cuts):
        """Verifying consecutive ranges and stitching them equals verifying the whole chain."""
        whole = verify_lines(LINES, TRUST)
        joined = stitch(_ranges(LINES, sorted(cuts)))
        assert joined.ok
        assert (joined.entries, joined.lines) == (whole.entries, whole.lines)
        assert (joined.genesis_hash, joined.head_hash, joined.head_ts) == (
            whole.genesis_hash,
            whole.head_hash,
            whole.head_ts,
        )

    @given(
        st.lists(st.integers(min_value=1, max_value=len(LINES) - 1), max_size=5, unique=True),
        st.integers(min_value=0, max_value=len(LINES) - 1),
        st.sampled_from(["delete", "junk", "swap"]),
    )
    def test_failure_line_matches_whole(self, cuts, position, damage):
        """A damaged chain stitched from ranges fails at the same line as a whole verify."""
        lines = list(LINES)
        if damage == "delete":
            del lines[position]
        elif damage == "junk":
            lines[position] = b"junk\n"
        elif position + 1 < len(lines):
            lines[position], lines[position + 1] = lines[position + 1], lines[position]
        else:
            lines[0], lines[position] = lines[position], lines[0]
        whole = verify_lines(lines, TRUST)
        valid_cuts = sorted(c for c in cuts if c < len(lines))
        joined = stitch(_ranges(lines, valid_cuts))
        assert (joined.ok, joined.line) == (whole.ok, whole.line)
        if not whole.ok:
            assert joined.reason == whole.reason

    def test_unlinked_range(self):
        """A range whose first entry does not link to the previous head fails at that entry."""
        reports = _ranges([*LINES[:4], *LINES[6:]], [4])
        joined = stitch(reports)
        assert (joined.ok, joined.line, joined.entries) == (False, 5, 4)
        assert joined.reason == "prev_hash does not match the previous entry"

    def test_reason_when_range_start_fails_link_and_signature(self):
        """A range's first entry failing link and signature reports the link, as serially."""
        foreign = build_chain(1, STRANGER, prev_hash="0" * 64)[0].line
        lines = [*LINES[:4], foreign, *LINES[4:]]
        whole = verify_lines(lines, TRUST)
        joined = stitch(_ranges(lines, [4]))
        assert (joined.line, joined.reason) == (whole.line, whole.reason)

    def test_first_failure_wins(self):
        """A failure in an earlier range wins over one in a later range."""
        lines = list(LINES)
        lines[2] = b"junk\n"
        lines[9] = b"junk\n"
        assert stitch(_ranges(lines, [5])).line == 3

    def test_empty(self):
        """Stitching nothing is an empty valid chain."""
        report = stitch([])
        assert report.ok
        assert report.entries == 0


@pytest.mark.parametrize("count", [1, 2, 30])
def test_chain_of_any_length_verifies(count):
    """Chains of 1, 2 and 30 entries verify with the right count."""
    report = verify_lines(lines_of(build_chain(count, KEY)), TRUST)
    assert (report.ok, report.entries) == (True, count)


def _with_signature_of(line: bytes, other: bytes) -> bytes:
    """``line`` carrying ``other``'s signature: the same entry, a signature that does not verify."""
    mine, theirs = full_entry(line), full_entry(other)
    mine["signature"] = theirs["signature"]
    return json.dumps(mine, separators=(",", ":")).encode() + b"\n"


class TestVouchedLines:
    """Lines the caller sealed itself: link and key checked, the Ed25519 check skipped."""

    def test_a_vouched_line_is_not_checked_for_its_signature(self):
        forged = [*LINES[:3], _with_signature_of(LINES[3], LINES[4]), *LINES[4:]]
        assert not verify_lines(forged, TRUST).ok
        verifier = ChainVerifier(TRUST, vouched=lambda line: line == forged[3].rstrip(b"\n"))
        assert all(verifier.feed(raw) for raw in forged)
        assert verifier.report().entries == len(LINES)

    def test_only_the_vouched_bytes_skip_the_check(self):
        forged = [*LINES[:3], _with_signature_of(LINES[3], LINES[4]), *LINES[4:]]
        verifier = ChainVerifier(TRUST, vouched=lambda line: line == LINES[3].rstrip(b"\n"))
        for raw in forged:
            if not verifier.feed(raw):
                break
        assert (verifier.report().line, verifier.report().reason) == (
            4,
            "signature does not verify",
        )

    def test_a_vouched_line_still_needs_a_trusted_key_and_its_link(self):
        strangers = lines_of(build_chain(3, STRANGER))
        verifier = ChainVerifier(TRUST, vouched=lambda _line: True)
        assert not verifier.feed(strangers[0])
        assert verifier.report().reason == f"unknown signing key {STRANGER.key_id}"
        relinked = ChainVerifier(TRUST, vouched=lambda _line: True)
        assert not relinked.feed(LINES[1])
        assert relinked.report().reason == "first entry's prev_hash is not GENESIS"
