"""Which keys may sign which entries: the trust store as a plain value.

A trust store lists writer keys with their validity windows, revocations, and a
``strict_after`` time from which every entry must be signed. It may itself be
signed by an offline root key; a home that pins the root's public key refuses a
trust store without a valid root signature.
"""

import base64
import binascii
import datetime as dt
from functools import lru_cache
from typing import Any, NamedTuple

from ledger.core.canonical import canonical_bytes, sha256_hex
from ledger.core.envelope import KEY_ID_RE, ParsedEntry
from ledger.core.signing import Signer, key_id_for, verify_b64
from ledger.core.timefmt import format_ts, parse_ts
from ledger.errors import CanonicalizationError, InputDataError

TRUST_FORMAT = "ledger-trust/1"


class TrustStoreError(InputDataError):
    """A trust store is malformed or its root signature does not verify."""


class TrustedKey(NamedTuple):
    """A writer key and the window in which its signatures count."""

    key_id: str
    public_raw: bytes
    valid_from: dt.datetime | None = None
    valid_until: dt.datetime | None = None
    signs: bool = True  # False: another writer's key (loa's), trusted to verify only

    def covers(self, moment: dt.datetime) -> bool:
        """Whether an entry sealed at ``moment`` falls inside the window (inclusive)."""
        if self.valid_from is not None and moment < self.valid_from:
            return False
        return self.valid_until is None or moment <= self.valid_until


class Revocation(NamedTuple):
    """A revoked key: entries at or after ``revoked_at`` (all, if ``None``) fail."""

    key_id: str
    revoked_at: dt.datetime | None = None
    reason: str = ""


class TrustStore:
    """The keys a verifier trusts (an immutable value).

    ``any_id_keys`` come from ``--key PEM`` without an id: each is tried for any
    ``signing_key_id`` the store does not name.
    """

    __slots__ = ("_by_id", "any_id_keys", "keys", "revocations", "strict_after")

    def __init__(
        self,
        keys: tuple[TrustedKey, ...] = (),
        revocations: tuple[Revocation, ...] = (),
        strict_after: dt.datetime | None = None,
        any_id_keys: tuple[bytes, ...] = (),
    ) -> None:
        self.keys = tuple(keys)
        self.revocations = tuple(revocations)
        self.strict_after = strict_after
        self.any_id_keys = tuple(any_id_keys)
        self._by_id = {key.key_id: key for key in self.keys}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TrustStore):
            return NotImplemented
        return (self.keys, self.revocations, self.strict_after, self.any_id_keys) == (
            other.keys,
            other.revocations,
            other.strict_after,
            other.any_id_keys,
        )

    def __hash__(self) -> int:
        return hash((self.keys, self.revocations, self.strict_after, self.any_id_keys))

    def __repr__(self) -> str:
        return f"TrustStore(keys={[k.key_id for k in self.keys]}, strict_after={self.strict_after})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable for the parallel verifier's worker processes.
        return (TrustStore, (self.keys, self.revocations, self.strict_after, self.any_id_keys))

    def key(self, key_id: str) -> TrustedKey | None:
        """The trusted key with this id, if any."""
        return self._by_id.get(key_id)

    def with_key(self, key: TrustedKey) -> "TrustStore":
        """A copy with ``key`` added (or replacing one with the same id)."""
        kept = tuple(k for k in self.keys if k.key_id != key.key_id)
        return TrustStore((*kept, key), self.revocations, self.strict_after, self.any_id_keys)

    def with_any_id_key(self, public_raw: bytes) -> "TrustStore":
        """A copy that also tries ``public_raw`` for any key id."""
        return TrustStore(
            self.keys, self.revocations, self.strict_after, (*self.any_id_keys, public_raw)
        )

    def with_revocation(self, revocation: Revocation) -> "TrustStore":
        """A copy with ``revocation`` added."""
        return TrustStore(
            self.keys, (*self.revocations, revocation), self.strict_after, self.any_id_keys
        )

    def with_strict_after(self, moment: dt.datetime) -> "TrustStore":
        """A copy in which every entry sealed at or after ``moment`` must be signed."""
        return TrustStore(self.keys, self.revocations, moment, self.any_id_keys)

    def ends_validity(self, key_id: str, until: dt.datetime) -> "TrustStore":
        """A copy in which ``key_id`` stops being valid after ``until``."""
        old = self.key(key_id)
        if old is None:
            return self
        return self.with_key(old._replace(valid_until=until))

    def _revoked(self, key_id: str, moment: dt.datetime) -> bool:
        return any(
            r.key_id == key_id and (r.revoked_at is None or moment >= r.revoked_at)
            for r in self.revocations
        )

    def signing_problem(self, key_id: str, moment: dt.datetime) -> str | None:
        """Why an entry signed by ``key_id`` at ``moment`` would not verify, or ``None``.

        A writer asks before it seals: an entry its own verifier would reject
        must never be written (a hand-edited trust store can revoke the active
        key, or start its validity later).
        """
        known = self.key(key_id)
        if known is None:
            return f"writer key {key_id} is not in the trust store"
        if self._revoked(key_id, moment):
            return f"writer key {key_id} is revoked at {format_ts(moment)}"
        if not known.covers(moment):
            return f"writer key {key_id} is not valid at {format_ts(moment)}"
        return None

    def signature_problem(
        self, parsed: ParsedEntry, *, strict: bool, vouched: bool = False
    ) -> str | None:
        """Why this entry's signature does not count, or ``None`` when it does.

        An unsigned entry is acceptable only before ``strict_after`` and when not
        ``strict``. ``vouched``: the caller signed exactly these bytes itself, so
        the Ed25519 check is skipped; the key must still be one this store names,
        valid and unrevoked at the entry's time.
        """
        if parsed.signature is None or parsed.signing_key_id is None:
            if strict:
                return "entry is unsigned (--strict)"
            if self.strict_after is not None and parse_ts(parsed.ts_utc) >= self.strict_after:
                return "entry is unsigned at or after strict_after"
            return None
        key_id = parsed.signing_key_id
        known = self.key(key_id)
        # The entry's time matters only for revocations and validity windows;
        # most verifications need neither, and parsing it per line shows.
        timed = bool(self.revocations) or (
            known is not None and (known.valid_from is not None or known.valid_until is not None)
        )
        moment = parse_ts(parsed.ts_utc) if timed else None
        if moment is not None and self._revoked(key_id, moment):
            return f"signing key {key_id} is revoked"
        if known is not None:
            if moment is not None and not known.covers(moment):
                return f"signing key {key_id} is not valid at {parsed.ts_utc}"
            if vouched or verify_b64(known.public_raw, parsed.signature, parsed.preimage):
                return None
            return "signature does not verify"
        for candidate in self.any_id_keys:
            if verify_b64(candidate, parsed.signature, parsed.preimage):
                return None
        if self.any_id_keys:
            return "signature does not verify"
        return f"unknown signing key {key_id}"


def only_widens(before: TrustStore, after: TrustStore) -> bool:
    """Whether every entry that verifies under ``before`` verifies under ``after``.

    True when ``after`` only adds keys (under ids ``before`` tried no key for:
    with keys tried for any id, an entry under a new id may have verified by
    one of them, and would be held to the new key instead), keeps every key,
    revocation and any-id key as it was, and asks for signatures from the
    same moment or a later one. Such a change cannot make a verified entry
    fail, so state verified under ``before`` holds under ``after`` (a home
    trusting another writer's key, a fleet enrolling a host). Anything else
    (a revocation, a validity shortened or moved, an earlier or new
    ``strict_after``) may, and the chain is verified again.
    """
    if before.revocations != after.revocations or before.any_id_keys != after.any_id_keys:
        return False
    if before.strict_after is None:
        if after.strict_after is not None:
            return False
    elif after.strict_after is not None and after.strict_after < before.strict_after:
        return False
    for key in before.keys:
        if after.key(key.key_id) != key:
            return False
    added = len(after.keys) - len(before.keys)
    return added == 0 or not before.any_id_keys


def _ts_or_none(value: Any, what: str, source: str = "trust store") -> dt.datetime | None:
    if value is None:
        return None
    try:
        return parse_ts(value)
    except ValueError as exc:
        raise TrustStoreError(f"{source}: {what}: {exc}") from exc


def _unsigned_document(store: TrustStore) -> dict[str, Any]:
    return {
        "format": TRUST_FORMAT,
        "strict_after": format_ts(store.strict_after) if store.strict_after else None,
        "keys": [
            {
                "key_id": k.key_id,
                "public_key": base64.b64encode(k.public_raw).decode("ascii"),
                "valid_from": format_ts(k.valid_from) if k.valid_from else None,
                "valid_until": format_ts(k.valid_until) if k.valid_until else None,
                # Written only for verify-only keys, so existing documents keep their bytes.
                **({} if k.signs else {"signs": False}),
            }
            for k in store.keys
        ],
        "revocations": [
            {
                "key_id": r.key_id,
                "revoked_at": format_ts(r.revoked_at) if r.revoked_at else None,
                "reason": r.reason,
            }
            for r in store.revocations
        ],
    }


@lru_cache(maxsize=8)
def trust_fingerprint(store: TrustStore) -> str:
    """A digest of everything in ``store`` that decides which entries verify.

    Derived state remembers the fingerprint of the trust store it was verified
    under; a different one means entries must be verified again (SPEC §4).
    """
    document = _unsigned_document(store)
    document["any_id_keys"] = sorted(key.hex() for key in store.any_id_keys)
    return sha256_hex(canonical_bytes(document))


def trust_document(store: TrustStore, root: Signer | None = None) -> dict[str, Any]:
    """The trust store as a JSON document, signed by ``root`` when given."""
    document = _unsigned_document(store)
    signature = None
    if root is not None:
        signature = {
            "key_id": root.key_id,
            "signature": root.sign_b64(canonical_bytes(document)),
        }
    document["root_signature"] = signature
    return document


def trust_from_document(
    document: Any, *, pinned_root: bytes | None = None, source: str = "trust store"
) -> TrustStore:
    """Read a trust document, checking its root signature when a root is pinned.

    Raises:
        TrustStoreError: malformed, or (with ``pinned_root``) unsigned or signed
            by another key.
    """
    try:
        if not isinstance(document, dict) or document.get("format") != TRUST_FORMAT:
            raise TrustStoreError(f"{source}: not a {TRUST_FORMAT} document")
        if pinned_root is not None:
            signed = dict(document)
            root_signature = signed.pop("root_signature", None)
            if not isinstance(root_signature, dict) or not verify_b64(
                pinned_root,
                str(root_signature.get("signature", "")),
                canonical_bytes(signed),
            ):
                raise TrustStoreError(f"{source}: root signature missing or invalid")
        keys = []
        for item in document["keys"]:
            key_id = item["key_id"]
            if not isinstance(key_id, str) or not KEY_ID_RE.fullmatch(key_id):
                raise TrustStoreError(f"{source}: malformed key id {key_id!r}")
            raw = base64.b64decode(item["public_key"], validate=True)
            if len(raw) != 32:  # noqa: PLR2004 - Ed25519 public keys are 32 bytes
                raise TrustStoreError(f"{source}: key {key_id} is not 32 bytes")
            signs = item.get("signs", True)
            if not isinstance(signs, bool):
                raise TrustStoreError(f"{source}: key {key_id} signs is not true or false")
            keys.append(
                TrustedKey(
                    key_id,
                    raw,
                    _ts_or_none(item.get("valid_from"), f"{key_id} valid_from", source),
                    _ts_or_none(item.get("valid_until"), f"{key_id} valid_until", source),
                    signs,
                )
            )
        revocations = tuple(
            Revocation(
                str(item["key_id"]),
                _ts_or_none(item.get("revoked_at"), "revoked_at", source),
                str(item.get("reason", "")),
            )
            for item in document.get("revocations", [])
        )
        strict_after = _ts_or_none(document.get("strict_after"), "strict_after", source)
    except TrustStoreError:
        raise
    except (KeyError, TypeError, ValueError, binascii.Error, AttributeError,
            CanonicalizationError) as exc:  # fmt: skip
        raise TrustStoreError(f"{source}: malformed: {exc}") from exc
    return TrustStore(tuple(keys), revocations, strict_after)


def trusted_key_for(signer: Signer, valid_from: dt.datetime) -> TrustedKey:
    """The trust-store record of a freshly made writer key."""
    return TrustedKey(signer.key_id, signer.public_raw, valid_from, None)


__all__ = [
    "Revocation",
    "TrustStore",
    "TrustStoreError",
    "TrustedKey",
    "key_id_for",
    "trust_document",
    "trust_from_document",
    "trusted_key_for",
]
