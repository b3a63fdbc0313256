"""Keys for a fleet: private keys in each host's home, the trust store in the database.

Every host keeps its own writer key (``keys/`` in its home, as on one host);
the trust store that lists all of them is one row of ``trust_store``, read
through the chain's connection so that a rotation commits with its
``ledger.key_rotated`` entry. A home that pins an offline root accepts only
a trust document that root signed, exactly as it would from ``trust.json``.

A host signs with the newest open-ended key of the trust store whose private
key is in its own home; the other hosts' keys only verify.
"""

import json
from pathlib import Path

from ledger.core.canonical import canonical_bytes
from ledger.core.signing import Signer
from ledger.core.trust import TrustStore, TrustStoreError, trust_document, trust_from_document
from ledger.edges.files.keyfiles import KeyDir
from ledger.edges.postgres.db import PgDatabase
from ledger.edges.postgres.reads import TRUST_SQL
from ledger.errors import KeyFileError


class PgKeyDir(KeyDir):
    """This host's key files, and the fleet's trust store in the database."""

    def __init__(self, home: Path, db: PgDatabase) -> None:
        super().__init__(home)
        self.db = db
        self._document_cache: tuple[bytes, bytes | None, TrustStore] | None = None

    def trust_bytes(self) -> bytes | None:
        """The stored trust document as it is, or ``None`` before the first enrolment."""
        # Changed only under the chain lock: a group's units read it once.
        kept = self.db.group_cache()
        if kept is None:
            kept = self.db.memo()
        if kept is not None and "trust" in kept:
            cached: bytes | None = kept["trust"]
            return cached
        rows = None if kept is None else kept.get("read", {}).pop(TRUST_SQL, None)
        if rows is None:
            rows = self.db.execute(TRUST_SQL)
        data = bytes(rows[0][0]) if rows else None
        if kept is not None:
            kept["trust"] = data  # read once per transaction
        return data

    def load_trust(self) -> TrustStore:
        """The fleet's trust store (root signature checked when this home pins a root).

        Raises:
            KeyFileError: none stored yet, or not JSON.
            TrustStoreError: malformed, or not signed by the pinned root.
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        data = self.trust_bytes()
        source = f"trust store in {self.db.display}"
        if data is None:
            raise KeyFileError(f"no {source}; run `ledger init`")
        pinned = self.pinned_root()
        cached = self._document_cache
        if cached is not None and cached[0] == data and cached[1] == pinned:
            return cached[2]
        try:
            document = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise KeyFileError(f"{source} is not JSON") from exc
        store = trust_from_document(document, pinned_root=pinned, source=source)
        self._document_cache = (data, pinned, store)
        return store

    def save_trust(self, store: TrustStore, root: Signer | None = None) -> None:
        """Replace the fleet's trust store (in the open transaction, if any).

        A stored version an offline root signed is replaced only by one the same
        root signs: whichever command gets here (enrol, rotate, revoke, pin-root)
        on whichever host, pinned or not.

        Raises:
            KeyFileError: the stored version is root-signed and ``root`` is not
                the key that signed it (nothing is written).
            StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        """
        stored = self.trust_bytes()
        if stored is not None and _root_signature(stored) is not None:
            if root is None:
                raise KeyFileError(
                    f"the trust store in {self.db.display} is signed by an offline root: "
                    "pass --root-key <its private key PEM>"
                )
            try:
                trust_from_document(json.loads(stored), pinned_root=root.public_raw)
            except (ValueError, RecursionError, TrustStoreError) as exc:
                raise KeyFileError(
                    f"the given root key did not sign the trust store in {self.db.display}"
                ) from exc
        document = canonical_bytes(trust_document(store, root)) + b"\n"
        memo = self.db.memo()
        if memo is not None:
            memo.pop("trust", None)
        self.db.execute(  # (inside a group, this makes it read everything again)
            "INSERT INTO trust_store (id, document) VALUES (1, %s) ON CONFLICT (id)"
            " DO UPDATE SET document = excluded.document, updated_at = now()",
            (document,),
        )

    def own_key_ids(self) -> set[str]:
        """The ids of the private keys in this home."""
        if not self.keys.is_dir():
            return set()
        return {path.name.removesuffix(".key.pem") for path in self.keys.glob("*.key.pem")}

    def active_signer(self, trust: TrustStore) -> Signer:
        """This host's signing key: the newest open-ended key whose private half is here.

        Raises:
            KeyFileError: this host has no enrolled key (run ``ledger keys enroll``),
                or its file is unusable.
        """
        own = self.own_key_ids()
        open_ended = [
            key for key in trust.keys if key.valid_until is None and key.signs and key.key_id in own
        ]
        if not open_ended:
            raise KeyFileError(
                f"no enrolled writer key of this host in the trust store in {self.db.display}; "
                "run `ledger keys enroll`"
            )
        newest = max(open_ended, key=lambda key: (key.valid_from is not None, key.valid_from))
        return self.load_signer(newest.key_id)

    def unenrolled_key(self, trust: TrustStore | None) -> Signer | None:
        """A private key of this home the trust store does not list yet, if any."""
        listed = set() if trust is None else {key.key_id for key in trust.keys}
        for key_id in sorted(self.own_key_ids() - listed):
            return self.load_signer(key_id)
        return None


def _root_signature(document: bytes) -> object:
    try:
        parsed = json.loads(document)
    except (ValueError, RecursionError):
        return None
    return parsed.get("root_signature") if isinstance(parsed, dict) else None
