"""Golden vectors: the envelope bytes this implementation seals must never drift."""

import base64
import hashlib
import json
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.chain import verify_lines
from ledger.core.envelope import parse_line, render_line, unsigned_entry
from ledger.core.signing import Signer, key_id_for, verify_b64
from ledger.core.trust import TrustedKey, TrustStore
from tests.vectors.generate import ENVELOPES, REGENERATE, build_vectors, expected_files, render

RFC8032_TEST1 = {
    "secret": "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
    "public": "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
    "signature": "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555"
    "fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
}


def _stored() -> list[dict[str, Any]]:
    return [json.loads(path.read_bytes()) for path in sorted(ENVELOPES.glob("*.json"))]


class TestGoldenFiles:
    def test_files_match_regenerated_bytes(self):
        """Every vector file equals, byte for byte, what the code seals today."""
        expected = expected_files()
        present = sorted(path.name for path in ENVELOPES.glob("*.json"))
        assert present == sorted(expected), (
            f"vector files {present} differ from the generated set {sorted(expected)}; "
            f"if the change is intended, run `{REGENERATE}` and review the diff"
        )
        for name, content in expected.items():
            stored = (ENVELOPES / name).read_bytes()
            assert stored == content, (
                f"tests/vectors/envelopes/{name} differs from the regenerated vector: the "
                f"canonical bytes, hash, signature or line changed. If that is intended, run "
                f"`{REGENERATE}` and review the diff"
            )

    def test_render_is_stable_json(self):
        """A vector file is the vector's JSON, indented, UTF-8, newline-terminated."""
        for vector in build_vectors():
            assert json.loads(render(vector)) == vector

    def test_vector_event_types(self):
        """The vectors cover both event types the core seals itself."""
        assert {v["event_type"] for v in _stored()} == {"budget.record_call", "ledger.key_rotated"}


class TestVectorContents:
    """Checks of the stored files that do not go through ``seal``."""

    @pytest.mark.parametrize("vector", _stored(), ids=lambda v: v["name"])
    def test_canonical_bytes_are_rfc8785_of_the_unsigned_entry(self, vector):
        """canonical_hex is the RFC 8785 form of the entry without its signature fields."""
        entry = unsigned_entry(
            vector["event_type"],
            vector["payload"],
            vector["ts_utc"],
            vector["prev_hash"],
            vector["redaction_applied"],
        )
        assert rfc8785.dumps(entry).hex() == vector["canonical_hex"]

    @pytest.mark.parametrize("vector", _stored(), ids=lambda v: v["name"])
    def test_hash_signature_and_key_id(self, vector):
        """entry_hash is SHA-256 of the canonical bytes; the signature verifies under the seed."""
        canonical = bytes.fromhex(vector["canonical_hex"])
        assert hashlib.sha256(canonical).hexdigest() == vector["entry_hash"]
        key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(vector["seed_hex"]))
        signer = Signer.from_private_key(key)
        assert signer.public_raw.hex() == vector["public_key_hex"]
        assert key_id_for(signer.public_raw) == vector["signing_key_id"]
        assert verify_b64(signer.public_raw, vector["signature"], canonical)
        assert base64.b64decode(vector["signature"]) == key.sign(canonical)

    @pytest.mark.parametrize("vector", _stored(), ids=lambda v: v["name"])
    def test_line_is_canonical_bytes_with_signature_spliced(self, vector):
        """The line is the canonical bytes with the signature fields before the last brace."""
        canonical = bytes.fromhex(vector["canonical_hex"])
        line = vector["line"].encode("utf-8")
        assert line == render_line(canonical, vector["signature"], vector["signing_key_id"])
        parsed = parse_line(line[:-1])
        assert parsed.preimage == canonical
        assert parsed.entry_hash == vector["entry_hash"]
        assert (parsed.signature, parsed.signing_key_id) == (
            vector["signature"],
            vector["signing_key_id"],
        )

    def test_vectors_form_one_valid_chain(self):
        """Read in file order, the vectors are a chain that verifies under both keys."""
        vectors = _stored()
        keys = {
            v["signing_key_id"]: TrustedKey(v["signing_key_id"], bytes.fromhex(v["public_key_hex"]))
            for v in vectors
        }
        report = verify_lines(
            [v["line"].encode("utf-8") for v in vectors], TrustStore(tuple(keys.values()))
        )
        assert report.ok, report
        assert report.entries == len(vectors)
        assert report.head_hash == vectors[-1]["entry_hash"]


class TestRfc8032:
    """RFC 8032 §7.1 TEST 1 through the product's signing API."""

    def _signer(self) -> Signer:
        seed = bytes.fromhex(RFC8032_TEST1["secret"])
        return Signer.from_private_key(Ed25519PrivateKey.from_private_bytes(seed))

    def test_public_key(self):
        """The secret key derives the RFC's public key, and the key id is its SHA-256 prefix."""
        signer = self._signer()
        assert signer.public_raw.hex() == RFC8032_TEST1["public"]
        assert signer.key_id == hashlib.sha256(signer.public_raw).hexdigest()[:16]

    def test_signature_of_empty_message(self):
        """Signing the empty message gives the RFC's signature, standard padded base64."""
        signature = self._signer().sign_b64(b"")
        assert base64.b64decode(signature, validate=True).hex() == RFC8032_TEST1["signature"]
        assert signature.endswith("==")
        assert len(signature) == 88

    def test_verify_b64(self):
        """The RFC's signature verifies for the empty message and for nothing else."""
        public = bytes.fromhex(RFC8032_TEST1["public"])
        signature = base64.b64encode(bytes.fromhex(RFC8032_TEST1["signature"])).decode()
        assert verify_b64(public, signature, b"")
        assert not verify_b64(public, signature, b"\x00")
        flipped = bytearray(bytes.fromhex(RFC8032_TEST1["signature"]))
        flipped[0] ^= 1
        assert not verify_b64(public, base64.b64encode(bytes(flipped)).decode(), b"")
