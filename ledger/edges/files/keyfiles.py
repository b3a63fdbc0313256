"""Writer keys and the trust store in a home: ``keys/``, ``trust.json``.

Private keys are PKCS#8 PEM files of mode 0600; a key file readable by group or
others is refused, as ssh refuses one.
"""

import contextlib
import json
import stat
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.canonical import canonical_bytes
from ledger.core.signing import (
    Signer,
    private_key_from_pem,
    private_pem,
    public_pem,
    public_raw_from_pem,
)
from ledger.core.trust import TrustStore, trust_document, trust_from_document
from ledger.edges.fileio import (
    ByIdentity,
    atomic_write,
    exclusive_create,
    file_identity,
    identity_of_stat,
    read_user_file,
)
from ledger.edges.files.groupcommit import held_memo
from ledger.edges.memo import remembered
from ledger.errors import ChainIOError, KeyFileError

# What this process has read (``ledger.edges.fileio.ByIdentity``): every append
# and every verdict reads the trust store and the key under the lock, and a
# resident gate answers many requests with a fresh ``KeyDir`` each.
_TRUST_SEEN: ByIdentity[TrustStore] = ByIdentity()
_SIGNERS_SEEN: ByIdentity[Signer] = ByIdentity()


class KeyDir:
    """The key files of one home."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.keys = home / "keys"
        self.trust_path = home / "trust.json"
        self.root_pin_path = home / "trust-root.pub.pem"

    def private_path(self, key_id: str) -> Path:
        """Where a writer's private key lives."""
        return self.keys / f"{key_id}.key.pem"

    def public_path(self, key_id: str) -> Path:
        """Where a writer's public key lives."""
        return self.keys / f"{key_id}.pub.pem"

    def generate(self) -> Signer:
        """Make and store a new writer key (never overwriting one).

        Raises:
            ChainIOError: the key files cannot be written.
        """
        signer = Signer.from_private_key(Ed25519PrivateKey.generate())
        try:
            self.keys.mkdir(parents=True, exist_ok=True)
            self.keys.chmod(0o700)
        except OSError as exc:
            raise ChainIOError(f"cannot create key directory {self.keys}: {exc.strerror}") from exc
        private = self.private_path(signer.key_id)
        exclusive_create(private, private_pem(signer.private_key), 0o600)
        try:
            atomic_write(self.public_path(signer.key_id), public_pem(signer.public_raw))
        except ChainIOError:
            # Without its public half the key is of no use: leave nothing behind.
            with contextlib.suppress(OSError):
                private.unlink()
            raise
        return signer

    def load_signer(self, key_id: str) -> Signer:
        """A writer's private key.

        Raises:
            KeyFileError: an unreadable or malformed file, one holding another key,
                or one readable by group or others.
        """
        path = self.private_path(key_id)
        try:
            info = path.stat()
        except OSError as exc:
            raise KeyFileError(f"cannot read key file {path}: {exc.strerror}") from exc
        mode = info.st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyFileError(
                f"key file {path} is accessible by others (mode {stat.S_IMODE(mode):04o}); "
                "chmod 600 it"
            )
        identity = identity_of_stat(info)
        signer = _SIGNERS_SEEN.get(identity)
        if signer is None:
            data = read_user_file(path, "key file")
            signer = remembered(
                "signer",
                data,
                lambda: Signer.from_private_key(private_key_from_pem(data, str(path))),
            )
            if stat.S_ISREG(mode):
                _SIGNERS_SEEN.keep(signer, identity)
        if signer.key_id != key_id:
            raise KeyFileError(f"key file {path} holds key {signer.key_id}, not {key_id}")
        return signer

    def active_signer(self, trust: TrustStore) -> Signer:
        """The key that signs new entries: the trusted key with no end of validity.

        Keeping the pointer inside the trust store makes a rotation one atomic
        file replace: the old key's end and the new key's start land together.

        Raises:
            KeyFileError: no such key (run ``ledger init``), or its file is unusable.
        """
        open_ended = [key for key in trust.keys if key.valid_until is None and key.signs]
        if not open_ended:
            raise KeyFileError(f"no active writer key in {self.trust_path}; run `ledger init`")
        newest = max(open_ended, key=lambda key: (key.valid_from is not None, key.valid_from))
        return self.load_signer(newest.key_id)

    def pinned_root(self) -> bytes | None:
        """The offline root key this home pins, if any."""
        if not self.root_pin_path.exists():
            return None
        data = read_user_file(self.root_pin_path, "root key")
        return public_raw_from_pem(data, str(self.root_pin_path))

    def load_trust(self) -> TrustStore:
        """The home's trust store (root signature checked when a root is pinned).

        Raises:
            InputDataError: missing, unreadable or malformed.
        """
        memo = held_memo(self.home)
        if memo is not None:
            held = memo.get(("trust", self.trust_path))
            if isinstance(held, TrustStore):
                return held
        store = self._load_trust()
        if memo is not None:
            memo[("trust", self.trust_path)] = store
        return store

    def _load_trust(self) -> TrustStore:
        identity = (file_identity(self.trust_path), file_identity(self.root_pin_path))
        known = _TRUST_SEEN.get(*identity)
        if known is not None:
            return known
        data = read_user_file(self.trust_path, "trust store")
        pinned = self.pinned_root()
        store = remembered(
            "trust", (str(self.trust_path), data, pinned), lambda: self._parse_trust(data, pinned)
        )
        if identity[0] is not None:
            _TRUST_SEEN.keep(store, *identity)
        return store

    def _parse_trust(self, data: bytes, pinned: bytes | None) -> TrustStore:
        try:
            document = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise KeyFileError(f"trust store {self.trust_path} is not JSON") from exc
        return trust_from_document(document, pinned_root=pinned, source=str(self.trust_path))

    def save_trust(self, store: TrustStore, root: Signer | None = None) -> None:
        """Write the trust store (signed by ``root`` when given).

        Raises:
            ChainIOError: the file cannot be written.
        """
        memo = held_memo(self.home)
        if memo is not None:
            memo.pop(("trust", self.trust_path), None)  # read again by the hold's later work
        atomic_write(self.trust_path, canonical_bytes(trust_document(store, root)) + b"\n")


def load_public_key_file(path: Path) -> bytes:
    """A PEM public key the user named on the command line.

    Raises:
        InputDataError: unreadable or not an Ed25519 PEM key.
    """
    return public_raw_from_pem(read_user_file(path, "key file"), str(path))
