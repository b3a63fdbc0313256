"""Ed25519 through ``cryptography``: signing, verifying, key ids, PEM parsing.

Signing is deterministic (RFC 8032), so golden vectors are stable.
"""

import base64
import binascii
import hashlib
from dataclasses import dataclass
from functools import lru_cache

from cryptography.exceptions import (
    InvalidSignature,
    UnsupportedAlgorithm as UnsupportedAlgorithmError,
)
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from ledger.errors import KeyFileError


def key_id_for(public_raw: bytes) -> str:
    """A key's id: the first 16 hex digits of SHA-256 over its raw 32 bytes."""
    return hashlib.sha256(public_raw).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Signer:
    """A writer's private key with the id its entries carry."""

    private_key: Ed25519PrivateKey
    key_id: str

    @classmethod
    def from_private_key(cls, private_key: Ed25519PrivateKey) -> "Signer":
        """Wrap a key, deriving its id from its public half."""
        return cls(private_key, key_id_for(public_raw_of(private_key)))

    def sign_b64(self, message: bytes) -> str:
        """Standard padded base64 of the Ed25519 signature over ``message``."""
        return base64.b64encode(self.private_key.sign(message)).decode("ascii")

    @property
    def public_raw(self) -> bytes:
        """The raw 32-byte public key."""
        return public_raw_of(self.private_key)


def public_raw_of(private_key: Ed25519PrivateKey) -> bytes:
    """The raw 32 bytes of a private key's public half."""
    return private_key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )


@lru_cache(maxsize=256)
def _public_key(public_raw: bytes) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(public_raw)


def verify_b64(public_raw: bytes, signature_b64: str, message: bytes) -> bool:
    """Whether ``signature_b64`` is a valid signature of ``message`` under the key."""
    try:
        signature = base64.b64decode(signature_b64, validate=True)
        _public_key(public_raw).verify(signature, message)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def private_key_from_pem(data: bytes, source: str) -> Ed25519PrivateKey:
    """Load an unencrypted PKCS#8 PEM Ed25519 private key.

    Raises:
        KeyFileError: not PEM, encrypted, or not Ed25519.
    """
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{source}: not an unencrypted PEM private key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{source}: not an Ed25519 key")
    return key


def public_raw_from_pem(data: bytes, source: str) -> bytes:
    """Load a PEM Ed25519 public key (or the public half of a private one).

    Raises:
        KeyFileError: not a PEM Ed25519 key.
    """
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithmError):
        if b"PRIVATE KEY" in data:
            return public_raw_of(private_key_from_pem(data, source))
        raise KeyFileError(f"{source}: not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{source}: not an Ed25519 key")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def private_pem(private_key: Ed25519PrivateKey) -> bytes:
    """Unencrypted PKCS#8 PEM of a private key (protected by file mode 0600)."""
    return private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def public_pem(public_raw: bytes) -> bytes:
    """SubjectPublicKeyInfo PEM of a raw public key."""
    return _public_key(public_raw).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
