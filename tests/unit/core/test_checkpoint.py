"""ledger.core.checkpoint: signed checkpoints make a cut tail visible."""

import json

import pytest

from ledger.core.canonical import canonical_bytes
from ledger.core.chain import verify_lines
from ledger.core.checkpoint import (
    CHECKPOINT_FORMAT,
    Checkpoint,
    CheckpointError,
    checkpoint_from_document,
    checkpoint_signature_problem,
    compare_with_checkpoint,
    make_checkpoint,
)
from ledger.core.signing import verify_b64
from ledger.errors import EXIT_DATA
from tests.helpers.chains import (
    build_chain,
    checkpoint_of,
    entry_hash,
    lines_of,
    signer,
    trust_for,
    verify_with_checkpoint,
)

KEY = signer(1)
TRUST = trust_for(KEY)
LINES = lines_of(build_chain(8, KEY))
CP = checkpoint_of(LINES, KEY, 6)


class TestMakeAndRead:
    def test_signed_part_and_signature(self):
        """The signature covers the RFC 8785 form of every field but itself."""
        assert CP.signed_part() == {
            "format": CHECKPOINT_FORMAT,
            "chain_id": entry_hash(LINES[0]),
            "entries": 6,
            "head_hash": entry_hash(LINES[5]),
            "ts_utc": CP.ts_utc,
            "signing_key_id": KEY.key_id,
        }
        assert verify_b64(KEY.public_raw, CP.signature, canonical_bytes(CP.signed_part()))

    def test_document_round_trip(self):
        """to_document and checkpoint_from_document are inverses (through JSON)."""
        document = json.loads(json.dumps(CP.to_document()))
        assert checkpoint_from_document(document, "cp.json") == CP

    @pytest.mark.parametrize(
        ("change", "match"),
        [
            ({"format": "ledger-checkpoint/0"}, "not a ledger-checkpoint/1"),
            ({"entries": 0}, "positive integer"),
            ({"entries": -3}, "positive integer"),
            ({"entries": "6"}, "positive integer"),
            ({"ts_utc": "2026-11-22"}, "malformed"),
            ({"chain_id": ...}, "malformed"),
            ({"signature": ...}, "malformed"),
        ],
    )
    def test_malformed_document(self, change, match):
        """A missing field, wrong format, bad count or bad time is a CheckpointError (exit 65)."""
        document = CP.to_document()
        for name, value in change.items():
            if value is ...:
                del document[name]
            else:
                document[name] = value
        with pytest.raises(CheckpointError, match=match) as info:
            checkpoint_from_document(document, "cp.json")
        assert info.value.exit_code == EXIT_DATA
        assert "cp.json" in str(info.value)

    @pytest.mark.parametrize("document", [None, [], "text", 5])
    def test_not_an_object(self, document):
        """A document that is not an object is a CheckpointError, not a crash."""
        with pytest.raises(CheckpointError):
            checkpoint_from_document(document, "cp.json")


class TestSignature:
    def test_trusted_signature(self):
        """A checkpoint signed by a trusted key has no signature problem."""
        assert checkpoint_signature_problem(CP, TRUST) is None

    def test_unknown_key(self):
        """A checkpoint signed by a key the verifier does not trust fails."""
        assert checkpoint_signature_problem(CP, trust_for(signer(2))) == (
            f"checkpoint: unknown signing key {KEY.key_id}"
        )

    @pytest.mark.parametrize("field", ["entries", "head_hash", "chain_id", "ts_utc"])
    def test_tampered_fields(self, field):
        """Changing any signed field invalidates the signature."""
        values = {
            "entries": 3,
            "head_hash": entry_hash(LINES[2]),
            "chain_id": "0" * 64,
            "ts_utc": "2026-11-22T09:00:00.000000Z",
        }
        document = {**CP.to_document(), field: values[field]}
        tampered = checkpoint_from_document(document, "cp.json")
        assert checkpoint_signature_problem(tampered, TRUST) == (
            "checkpoint: signature does not verify"
        )

    def test_any_id_key_signs_checkpoints(self):
        """A key trusted for any id (--key PEM) verifies a checkpoint."""
        store = trust_for(any_id=[KEY])
        assert checkpoint_signature_problem(CP, store) is None


class TestCompare:
    def _compare(self, lines: list[bytes], checkpoint: Checkpoint):
        report = verify_lines(lines, TRUST)
        assert report.ok
        at = entry_hash(lines[checkpoint.entries - 1]) if len(lines) >= checkpoint.entries else None
        return compare_with_checkpoint(report, checkpoint, at)

    def test_same_length(self):
        """The chain the checkpoint was taken of matches it."""
        assert self._compare(LINES[:6], CP) is None

    def test_grown(self):
        """A chain that grew after the checkpoint still matches it."""
        assert self._compare(LINES, CP) is None

    @pytest.mark.parametrize("kept", [1, 3, 5])
    def test_truncated(self, kept):
        """A chain shorter than the checkpoint is reported at its first missing line."""
        line, reason = self._compare(LINES[:kept], CP) or (None, "")
        assert line == kept + 1
        assert "truncated" in reason
        assert f"log has {kept}" in reason

    def test_empty_chain(self):
        """An emptied chain is missing its first line."""
        line, _reason = self._compare([], CP) or (None, "")
        assert line == 1

    def test_truncated_and_reappended(self):
        """Cut to 4 entries and re-grown to 8 by a trusted key: entry 6 differs."""
        regrown = [
            *LINES[:4],
            *lines_of(build_chain(4, KEY, prev_hash=entry_hash(LINES[3]), first_index=100)),
        ]
        assert self._compare(regrown, CP) == (
            6,
            "entry differs from the checkpoint's head (truncated and re-appended?)",
        )

    def test_other_chain(self):
        """A chain with another first entry is a different chain: line 1."""
        other = lines_of(build_chain(8, KEY, first_index=50))
        assert self._compare(other, CP) == (1, "chain identity differs from the checkpoint's")

    def test_helper_mirrors_verify_store(self):
        """verify_with_checkpoint (used by the property tests) reports like the service."""
        assert verify_with_checkpoint(LINES, TRUST, CP) is None
        assert verify_with_checkpoint(LINES[:2], TRUST, CP) == (
            3,
            "entry missing: checkpoint has 6 entries, log has 2 (truncated)",
        )
        assert verify_with_checkpoint(LINES, trust_for(), CP) == (
            1,
            f"unknown signing key {KEY.key_id}",
        )


def test_make_checkpoint_is_deterministic():
    """The same chain state and time give the same checkpoint bytes."""
    again = make_checkpoint(KEY, CP.chain_id, CP.entries, CP.head_hash, CP.ts_utc)
    assert again == CP
