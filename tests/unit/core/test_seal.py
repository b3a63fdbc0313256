"""ledger.core.seal: validating, canonicalizing, signing and rendering one entry."""

import datetime as dt
import json

import pytest

from ledger.core.canonical import canonical_bytes, sha256_hex
from ledger.core.envelope import GENESIS, parse_line
from ledger.core.seal import seal, seal_time
from ledger.core.signing import verify_b64
from ledger.edges.schemas import load_schema
from ledger.errors import CanonicalizationError, SchemaValidationError
from tests.helpers.chains import BASE_TIME, EVENT, record_payload, signer

KEY = signer(3)
SCHEMA = load_schema(EVENT)


def _seal(payload=None, **kwargs):
    options = {"moment": BASE_TIME, "prev_hash": None, "signer": KEY, **kwargs}
    return seal(EVENT, payload or record_payload(0), SCHEMA, **options)


class TestSealTime:
    def test_now_when_head_is_older(self):
        """An entry is sealed with the current time when the head is older."""
        head = "2026-11-22T07:59:59.999999Z"
        assert seal_time(BASE_TIME, head) == BASE_TIME

    def test_never_before_head(self):
        """A clock behind the chain's head seals with the head's time: time never goes back."""
        later = BASE_TIME + dt.timedelta(hours=1)
        assert seal_time(BASE_TIME, "2026-11-22T09:00:00.000000Z") == later

    def test_empty_chain(self):
        """With no head the current time is used."""
        assert seal_time(BASE_TIME, None) == BASE_TIME


class TestSeal:
    def test_genesis_entry(self):
        """The first entry links to GENESIS and carries the formatted time."""
        sealed = _seal()
        assert sealed.entry["prev_hash"] == GENESIS
        assert sealed.ts_utc == "2026-11-22T08:00:00.000000Z"

    def test_line_hash_and_signature(self):
        """The hash is SHA-256 of the canonical bytes, which the signature covers."""
        sealed = _seal(prev_hash="ab" * 32)
        preimage = canonical_bytes(sealed.entry)
        assert sealed.entry_hash == sha256_hex(preimage)
        parsed = parse_line(sealed.line[:-1])
        assert parsed.preimage == preimage
        assert parsed.signing_key_id == KEY.key_id
        assert verify_b64(KEY.public_raw, parsed.signature or "", preimage)

    def test_one_line(self):
        """A sealed line is one JSON object, newline-terminated, with no other newline."""
        sealed = _seal(record_payload(0) | {"model_id": "a\nb"})
        assert sealed.line.endswith(b"\n")
        assert sealed.line.count(b"\n") == 1
        assert json.loads(sealed.line)["payload"]["model_id"] == "a\nb"

    def test_deterministic(self):
        """Same inputs, same bytes."""
        assert _seal().line == _seal().line

    def test_time_is_normalized_to_utc(self):
        """An aware time in another zone is sealed in UTC."""
        zone = dt.timezone(dt.timedelta(hours=2))
        sealed = _seal(moment=BASE_TIME.astimezone(zone))
        assert sealed.ts_utc == "2026-11-22T08:00:00.000000Z"

    def test_naive_time_refused(self):
        """A naive datetime is ambiguous and refused."""
        with pytest.raises(ValueError, match="naive"):
            _seal(moment=dt.datetime(2026, 11, 22, 8, 0))  # noqa: DTZ001 - the point

    def test_invalid_payload_refused(self):
        """A payload that fails its schema is never sealed."""
        with pytest.raises(SchemaValidationError, match="actual_micros"):
            _seal(record_payload(0) | {"actual_micros": -1})

    def test_float_refused(self):
        """A float is refused even where the schema allows any value."""
        with pytest.raises(CanonicalizationError, match="float"):
            seal(
                EVENT,
                {"usd": 1.5},
                {"type": "object"},
                moment=BASE_TIME,
                prev_hash=None,
                signer=KEY,
            )
