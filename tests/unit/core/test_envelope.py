"""ledger.core.envelope: rendering and parsing chain lines (format 1.1.0)."""

import json
from typing import Any

import pytest
import rfc8785

from ledger.core.canonical import canonical_bytes, sha256_hex
from ledger.core.envelope import (
    ENVELOPE_FIELDS,
    GENESIS,
    EnvelopeFormatError,
    parse_line,
    render_line,
    unsigned_entry,
)
from tests.helpers.chains import build_chain, foreign_line, full_entry, signer

KEY = signer(1)
LINE = build_chain(2, KEY)[1].line  # links to a real entry: prev_hash is a hash
BODY = LINE[:-1]


def _unsigned_json(**changes: Any) -> dict[str, Any]:
    entry = full_entry(LINE)
    for name, value in changes.items():
        if value is ...:
            del entry[name]
        else:
            entry[name] = value
    return entry


def _as_foreign(entry: dict[str, Any]) -> bytes:
    return bytes(rfc8785.dumps(entry))


class TestRender:
    def test_unsigned_entry_has_every_field_but_the_signature(self):
        """unsigned_entry holds exactly the envelope fields minus signature and key id."""
        entry = unsigned_entry("budget.record_call", {}, "2026-11-22T00:00:00.000000Z", GENESIS)
        assert set(entry) == ENVELOPE_FIELDS - {"signature", "signing_key_id"}
        assert entry["schema_version"] == "1.1.0"
        assert entry["primitive_id"] == "L2"
        assert entry["redaction_applied"] is None

    def test_render_splices_signature_before_last_brace(self):
        """Our line = canonical bytes, signature fields spliced before the final brace, newline."""
        preimage = b'{"a":1}'
        assert render_line(preimage, "QUJD", "k1") == (
            b'{"a":1,"signature":"QUJD","signing_key_id":"k1"}\n'
        )

    def test_rendered_line_is_valid_json(self):
        """A rendered line parses as one JSON object holding every envelope field."""
        assert set(json.loads(LINE)) == ENVELOPE_FIELDS


class TestFastPathAndForeignPathAgree:
    @pytest.mark.parametrize("style", ["jcs", "reversed"])
    def test_same_hash_signature_and_entry(self, style):
        """Our line and the same entry written another way parse to the same hash and fields."""
        ours = parse_line(BODY)
        theirs = parse_line(foreign_line(LINE, style)[:-1])
        assert theirs.entry_hash == ours.entry_hash
        assert theirs.preimage == ours.preimage
        assert theirs.entry == ours.entry
        assert (theirs.signature, theirs.signing_key_id) == (ours.signature, ours.signing_key_id)

    def test_fast_path_preimage_is_canonical(self):
        """For our lines the preimage is the RFC 8785 form of the unsigned entry."""
        parsed = parse_line(BODY)
        assert parsed.preimage == canonical_bytes(parsed.entry)
        assert parsed.entry_hash == sha256_hex(parsed.preimage)

    def test_table_order_compact_line_is_recanonicalized(self):
        """An entry in SPEC field order with compact separators hashes like the canonical one."""
        theirs = parse_line(foreign_line(LINE, "table")[:-1])
        assert theirs.entry_hash == parse_line(BODY).entry_hash

    def test_whitespace_before_our_tail_is_recanonicalized(self):
        """Whitespace inside the body of a line with our tail does not change its hash."""
        spaced = BODY.replace(b'"payload":{', b'"payload": {', 1)
        assert parse_line(spaced).entry_hash == parse_line(BODY).entry_hash

    def test_unsigned_line(self):
        """A line without signature fields parses with signature and key id None."""
        parsed = parse_line(foreign_line(LINE, "unsigned")[:-1])
        assert parsed.signature is None
        assert parsed.signing_key_id is None
        assert parsed.entry_hash == parse_line(BODY).entry_hash

    def test_null_signature_counts_as_unsigned(self):
        """signature: null and signing_key_id: null parse as an unsigned entry."""
        entry = _unsigned_json(signature=None, signing_key_id=None)
        parsed = parse_line(_as_foreign(entry))
        assert parsed.signature is None
        assert parsed.signing_key_id is None

    def test_foreign_floats_are_hashed_as_numbers(self):
        """Another writer's float payload values are hashed in RFC 8785 number form."""
        entry = _unsigned_json()
        entry["payload"] = {"usd": 1.50}
        parsed = parse_line(json.dumps(entry).encode())
        assert b'"usd":1.5' in parsed.preimage


class TestRejected:
    def _rejects(self, line: bytes, match: str | None = None) -> None:
        with pytest.raises(EnvelopeFormatError, match=match):
            parse_line(line)

    def test_not_json(self):
        """A line that is not JSON is rejected as such."""
        self._rejects(b"hello", "not JSON")
        self._rejects(BODY[:-5], "not JSON")

    def test_not_utf8(self):
        """Invalid UTF-8 is rejected (on both paths)."""
        self._rejects(b'{"a":"\xff"}', "not JSON")
        self._rejects(BODY.replace(b"openai", b"open\xffi"), "not JSON")

    def test_not_an_object(self):
        """A JSON array or scalar is not an entry."""
        self._rejects(b"[1,2]", "not a JSON object")
        self._rejects(b"42", "not a JSON object")

    def test_unknown_top_level_field_foreign(self):
        """A field outside the envelope table is rejected."""
        self._rejects(_as_foreign(_unsigned_json(extra=1)), "unknown top-level field 'extra'")

    def test_unknown_top_level_field_fast_path(self):
        """An unknown field in a line with our tail is rejected too."""
        self._rejects(BODY.replace(b'{"event_type"', b'{"aaa":1,"event_type"', 1), "unknown")

    @pytest.mark.parametrize(
        "field",
        ["schema_version", "primitive_id", "event_type", "ts_utc", "prev_hash", "payload",
         "redaction_applied"],
    )  # fmt: skip
    def test_missing_field(self, field):
        """Each unsigned envelope field is required (redaction_applied may be null, not absent)."""
        self._rejects(_as_foreign(_unsigned_json(**{field: ...})), field)

    def test_missing_field_fast_path(self):
        """A line with our tail but no redaction_applied is rejected."""
        self._rejects(BODY.replace(b',"redaction_applied":null', b""), "redaction_applied missing")

    @pytest.mark.parametrize(
        "ts",
        [
            "2026-11-22T08:00:00Z",
            "2026-11-22T08:00:00.000000+00:00",
            "2026-11-22 08:00:00.000000Z",
            "2026-11-22T08:00:00.00000Z",
            1_700_000_000,
            None,
        ],
    )
    def test_bad_ts(self, ts):
        """ts_utc must be exactly YYYY-MM-DDTHH:MM:SS.ffffffZ."""
        self._rejects(_as_foreign(_unsigned_json(ts_utc=ts)), "ts_utc")

    @pytest.mark.parametrize(
        "prev",
        ["genesis", "", "A" * 64, "0" * 63, "0" * 65, "g" * 64, None, 0],
    )
    def test_bad_prev_hash(self, prev):
        """prev_hash is GENESIS or 64 lowercase hex digits."""
        self._rejects(_as_foreign(_unsigned_json(prev_hash=prev)), "prev_hash")

    @pytest.mark.parametrize(
        "ts",
        ["2026-13-22T08:00:00.000000Z", "2026-02-30T08:00:00.000000Z",
         "2026-11-22T24:00:00.000000Z", "2026-11-22T08:60:00.000000Z",
         "2026-11-22T08:00:61.000000Z"],
    )  # fmt: skip
    def test_impossible_calendar_time(self, ts):
        """A ts_utc of the right shape but no real time (month 13, Feb 30, 24:00) is rejected."""
        self._rejects(_as_foreign(_unsigned_json(ts_utc=ts)), "ts_utc")
        self._rejects(BODY.replace(full_entry(LINE)["ts_utc"].encode(), ts.encode()), "ts_utc")

    def test_bad_prev_hash_fast_path(self):
        """An uppercase prev_hash in a line with our tail is rejected."""
        prev = full_entry(LINE)["prev_hash"]
        self._rejects(BODY.replace(prev.encode(), prev.upper().encode()), "prev_hash")

    @pytest.mark.parametrize(
        ("field", "value", "match"),
        [
            ("schema_version", "1.0.0", "schema_version"),
            ("primitive_id", "", "primitive_id"),
            ("event_type", "Budget.Allow", "event_type"),
            ("event_type", "budget", "event_type"),
            ("payload", [1], "payload"),
            ("redaction_applied", "email", "redaction_applied"),
            ("redaction_applied", [1], "redaction_applied"),
            ("signature", "not base64!", "signature"),
            ("signature", 5, "signature"),
            ("signing_key_id", "Upper", "signing_key_id"),
        ],
    )
    def test_malformed_field(self, field, value, match):
        """Each field's form is checked."""
        self._rejects(_as_foreign(_unsigned_json(**{field: value})), match)

    def test_duplicate_top_level_key_foreign(self):
        """A repeated top-level key is rejected, never resolved last-wins."""
        line = _as_foreign(_unsigned_json())
        self._rejects(line[:-1] + b',"ts_utc":"2026-11-22T08:00:00.000000Z"}', "duplicate")

    def test_duplicate_payload_key_foreign(self):
        """A repeated key inside the payload is rejected too."""
        line = _as_foreign(_unsigned_json())
        self._rejects(line.replace(b'"payload":{', b'"payload":{"provider":"x",', 1), "duplicate")

    def test_duplicate_key_fast_path(self):
        """A repeated key in a line with our tail is rejected."""
        dup = BODY.replace(b'"payload":{', b'"payload":{"provider":"x",', 1)
        self._rejects(dup, "duplicate")

    def test_signature_field_twice(self):
        """Two signature tails: the body then holds a signature field and is rejected."""
        tail = BODY[BODY.rfind(b',"signature"') : -1]
        self._rejects(BODY[:-1] + tail + b"}", "signature|unknown or repeated")

    def test_trailing_garbage_after_our_tail(self):
        """Bytes after our tail's closing brace make the line malformed."""
        self._rejects(BODY + b" x", "not JSON")

    def test_unrepresentable_integer(self):
        """An integer beyond 2**53 - 1 in another writer's entry is rejected."""
        entry = _unsigned_json()
        entry["payload"] = {"n": 2**60}
        self._rejects(json.dumps(entry).encode(), "safe integer")
