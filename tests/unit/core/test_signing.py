"""ledger.core.signing: Ed25519 signing, verifying, key ids and PEM files."""

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.envelope import KEY_ID_RE
from ledger.core.signing import (
    Signer,
    key_id_for,
    private_key_from_pem,
    private_pem,
    public_pem,
    public_raw_from_pem,
    verify_b64,
)
from ledger.errors import KeyFileError
from tests.helpers.chains import signer

KEY = signer(7)
MESSAGE = b"canonical bytes"
B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _same_bytes_other_encoding(signature_b64: str) -> str:
    """The signature with its last data character's unused low bits changed."""
    index = B64_ALPHABET.index(signature_b64[-3])
    other = B64_ALPHABET[index ^ 0b1111]  # same top 2 bits: the same decoded byte
    return signature_b64[:-3] + other + "=="


class TestSigner:
    def test_key_id_is_sha256_prefix(self):
        """A key id is the first 16 hex digits of SHA-256 over the raw public key."""
        assert KEY.key_id == hashlib.sha256(KEY.public_raw).hexdigest()[:16]
        assert key_id_for(KEY.public_raw) == KEY.key_id
        assert KEY_ID_RE.match(KEY.key_id)

    def test_deterministic(self):
        """Ed25519 signing is deterministic: same key and message, same signature."""
        assert KEY.sign_b64(MESSAGE) == signer(7).sign_b64(MESSAGE)
        assert KEY.sign_b64(MESSAGE) != KEY.sign_b64(MESSAGE + b".")

    def test_signature_is_standard_padded_base64(self):
        """Signatures are standard padded base64 of 64 bytes."""
        signature = KEY.sign_b64(MESSAGE)
        assert len(base64.b64decode(signature, validate=True)) == 64
        assert signature.endswith("==")


class TestVerify:
    def test_valid(self):
        """A signature verifies under its key and message."""
        assert verify_b64(KEY.public_raw, KEY.sign_b64(MESSAGE), MESSAGE)

    def test_wrong_key_or_message(self):
        """Another key or another message does not verify."""
        signature = KEY.sign_b64(MESSAGE)
        assert not verify_b64(signer(8).public_raw, signature, MESSAGE)
        assert not verify_b64(KEY.public_raw, signature, MESSAGE + b" ")

    @pytest.mark.parametrize(
        "signature", ["", "!!!!", "AAAA", "A" * 87 + "=", "A" * 86, base64.b64encode(b"x" * 65)]
    )
    def test_malformed_signature_is_false_not_an_error(self, signature):
        """Malformed base64 or a wrong length returns False instead of raising."""
        text = signature if isinstance(signature, str) else signature.decode()
        assert not verify_b64(KEY.public_raw, text, MESSAGE)

    def test_malformed_public_key_is_false(self):
        """A public key of the wrong length returns False."""
        assert not verify_b64(b"\x00" * 31, KEY.sign_b64(MESSAGE), MESSAGE)

    def test_noncanonical_base64_encoding_refused(self):
        """Only the one canonical base64 encoding of a signature is accepted."""
        signature = KEY.sign_b64(MESSAGE)
        other = _same_bytes_other_encoding(signature)
        assert other != signature
        assert base64.b64decode(other) == base64.b64decode(signature)
        assert not verify_b64(KEY.public_raw, other, MESSAGE)


class TestPem:
    def test_private_round_trip(self):
        """A private key survives PKCS#8 PEM and keeps its id."""
        loaded = private_key_from_pem(private_pem(KEY.private_key), "k")
        assert Signer.from_private_key(loaded).key_id == KEY.key_id

    def test_public_from_public_or_private_pem(self):
        """A public key loads from a public PEM or from a private PEM's public half."""
        assert public_raw_from_pem(public_pem(KEY.public_raw), "k") == KEY.public_raw
        assert public_raw_from_pem(private_pem(KEY.private_key), "k") == KEY.public_raw

    @pytest.mark.parametrize("data", [b"", b"not a pem", b"-----BEGIN PUBLIC KEY-----\nAA==\n"])
    def test_garbage_is_a_key_file_error(self, data):
        """Unparseable key data raises KeyFileError (exit 65), naming the source."""
        with pytest.raises(KeyFileError, match="src"):
            public_raw_from_pem(data, "src")
        with pytest.raises(KeyFileError, match="src"):
            private_key_from_pem(data, "src")

    def test_non_ed25519_refused(self):
        """An EC key is not a writer key."""
        other = ec.generate_private_key(ec.SECP256R1())
        private = other.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        public = other.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        with pytest.raises(KeyFileError, match="Ed25519"):
            private_key_from_pem(private, "src")
        with pytest.raises(KeyFileError, match="Ed25519"):
            public_raw_from_pem(public, "src")

    def test_encrypted_private_key_refused(self):
        """An encrypted private key is refused (keys are protected by file mode)."""
        data = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pw"),
        )
        with pytest.raises(KeyFileError, match="unencrypted"):
            private_key_from_pem(data, "src")
