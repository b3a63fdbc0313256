"""Ed25519 through ``cryptography``: signing, verifying, key ids, PEM parsing.

Signing is deterministic (RFC 8032), so golden vectors are stable.
"""

import base64
import binascii
import hashlib
from functools import lru_cache
from typing import NamedTuple

from cryptography.exceptions import (
    InvalidSignature,
)
from cryptography.exceptions import (
    UnsupportedAlgorithm as UnsupportedAlgorithmError,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from ledger.errors import KeyFileError


def key_id_for(public_raw: bytes) -> str:
    """A key's id: the first 16 hex digits of SHA-256 over its raw 32 bytes."""
    return hashlib.sha256(public_raw).hexdigest()[:16]


class Signer(NamedTuple):
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
    return private_key.public_key().public_bytes_raw()


# RFC 8410 §7: an unencrypted Ed25519 PKCS#8 key is this fixed 16-byte DER
# prefix followed by the 32-byte seed. Recognising the exact bytes lets the
# per-call path skip importing cryptography's general key loaders; anything
# else goes through them.
_PKCS8_ED25519_PREFIX = bytes.fromhex("302e020100300506032b657004220420")
_PEM_HEADER = b"-----BEGIN PRIVATE KEY-----"
_PEM_FOOTER = b"-----END PRIVATE KEY-----"


def _pkcs8_ed25519_seed(data: bytes) -> bytes | None:
    text = data.strip()
    if not (text.startswith(_PEM_HEADER) and text.endswith(_PEM_FOOTER)):
        return None
    body = b"".join(text[len(_PEM_HEADER) : -len(_PEM_FOOTER)].split())
    try:
        der = base64.b64decode(body, validate=True)
    except binascii.Error:
        return None
    if len(der) == len(_PKCS8_ED25519_PREFIX) + 32 and der.startswith(_PKCS8_ED25519_PREFIX):
        return der[len(_PKCS8_ED25519_PREFIX) :]
    return None


@lru_cache(maxsize=256)
def _public_key(public_raw: bytes) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(public_raw)


def verify_b64(public_raw: bytes, signature_b64: str, message: bytes) -> bool:
    """Whether ``signature_b64`` is a valid signature of ``message`` under the key."""
    try:
        signature = binascii.a2b_base64(signature_b64)
        # Only the one canonical encoding counts: the unused low bits of the last
        # character must be zero, or a signature could be rewritten undetected.
        # Re-encoding equal to the input also proves every character valid, which
        # the lenient decode above does not check by itself.
        if binascii.b2a_base64(signature, newline=False).decode("ascii") != signature_b64:
            return False
        _public_key(public_raw).verify(signature, message)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def private_key_from_pem(data: bytes, source: str) -> Ed25519PrivateKey:
    """Load an unencrypted PKCS#8 PEM Ed25519 private key.

    Raises:
        KeyFileError: not PEM, encrypted, or not Ed25519.
    """
    seed = _pkcs8_ed25519_seed(data)
    if seed is not None:
        return Ed25519PrivateKey.from_private_bytes(seed)
    from cryptography.hazmat.primitives import serialization

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
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithmError):
        if b"PRIVATE KEY" in data:
            return public_raw_of(private_key_from_pem(data, source))
        raise KeyFileError(f"{source}: not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{source}: not an Ed25519 key")
    return key.public_bytes_raw()


def private_pem(private_key: Ed25519PrivateKey) -> bytes:
    """Unencrypted PKCS#8 PEM of a private key (protected by file mode 0600)."""
    from cryptography.hazmat.primitives import serialization

    return private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def public_pem(public_raw: bytes) -> bytes:
    """SubjectPublicKeyInfo PEM of a raw public key."""
    from cryptography.hazmat.primitives import serialization

    return _public_key(public_raw).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
