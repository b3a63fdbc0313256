"""Derived state on disk: ``state/derived.json``, bound to the chain head by a MAC.

The file records which chain head it reflects (hash and byte size). A keyed
MAC (HMAC-SHA256, key in ``keys/state-mac.key``, mode 0600) makes an edit of
the file detectable. The file is replaced atomically but not fsync'd: after a
power loss it may lag the chain, which the gate catches up by verifying the
missing tail, or it may be unreadable, which the gate treats as a mismatch
(``counter_inconsistent`` until ``ledger rebuild-state``).

Inside ``ledger.edges.files.keptstate.keeping`` (the resident gate) saves and loads
go through memory, and the file is written from there now and then.
"""

import contextlib
import hashlib
import hmac
import json
import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from ledger.core.state import STATE_FORMAT
from ledger.edges.fileio import (
    ByIdentity,
    atomic_write,
    exclusive_create,
    file_identity,
    read_regular,
)
from ledger.edges.files import keptstate
from ledger.errors import ChainIOError, StateMismatchError

_MAC_KEY_BYTES = 32
# MAC keys this process has read, by the identity of their file.
_MAC_KEYS_SEEN: ByIdentity[bytes] = ByIdentity()


class StoredState(NamedTuple):
    """Derived state and the chain head it reflects."""

    head_hash: str | None
    size: int
    data: dict[str, Any]


class StateFile:
    """The derived-state file of one home."""

    def __init__(self, directory: Path, mac_key_path: Path) -> None:
        self.path = directory / "derived.json"
        self.mac_key_path = mac_key_path

    def _mac_key(self, *, create: bool) -> bytes | None:
        # Every verdict loads and saves the state; the key is read again only
        # when its file is another one (``identity_of_stat``).
        identity = file_identity(self.mac_key_path)
        known = _MAC_KEYS_SEEN.get(identity)
        if known is not None:
            return known
        key = self._read_mac_key(create=create)
        if identity is not None and key is not None:
            _MAC_KEYS_SEEN.keep(key, identity)
        return key

    def _read_mac_key(self, *, create: bool) -> bytes | None:
        # Read without blocking: a FIFO or a directory in its place is an I/O
        # failure (ChainIOError), never a read that waits forever.
        try:
            return read_regular(self.mac_key_path)
        except FileNotFoundError:
            if not create:
                return None
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.mac_key_path}: {exc.strerror}") from exc
        with contextlib.suppress(FileExistsError):
            exclusive_create(self.mac_key_path, os.urandom(_MAC_KEY_BYTES), 0o600)
        try:
            return read_regular(self.mac_key_path)
        except OSError as exc:
            raise ChainIOError(f"cannot read {self.mac_key_path}: {exc.strerror}") from exc

    def load(self) -> StoredState | None:
        """The stored state, or ``None`` when there is none.

        Raises:
            StateMismatchError: the file exists but is unreadable, malformed, or
                its MAC does not match (edited).
            ChainIOError: the MAC key cannot be read.
        """
        kept = keptstate.current()
        raw: bytes | object | None = keptstate.MISSING
        if kept is not None:
            raw = kept.lookup(keptstate.absolute(self.path))
            if raw is None:
                return None
        try:
            if not isinstance(raw, bytes):
                raw = read_regular(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateMismatchError(f"derived state unreadable: {exc.strerror}") from exc
        body, _, mac = raw.rstrip(b"\n").rpartition(b"\n")
        key = self._mac_key(create=False)
        if key is None:
            raise StateMismatchError("derived state present but its MAC key is missing")
        expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode("ascii")
        if not hmac.compare_digest(expected, mac):
            raise StateMismatchError("derived state does not match its MAC (edited?)")
        try:
            document = json.loads(body)
            if document["format"] != STATE_FORMAT:
                raise StateMismatchError("derived state has an unknown format")
            return StoredState(document["head_hash"], int(document["size"]), document["data"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StateMismatchError(f"derived state malformed: {exc}") from exc

    def save_state(self, head_hash: str | None, size: int, data: dict[str, Any]) -> None:
        """Replace the stored state.

        Raises:
            ChainIOError: the file cannot be written.
        """
        body = json.dumps(
            {
                "format": STATE_FORMAT,
                "head_hash": head_hash,
                "size": size,
                "data": data,
            },
            sort_keys=True,
            separators=(",", ":"),
        ).encode("utf-8")
        key = self._mac_key(create=True)
        assert key is not None  # noqa: S101 - create=True always yields a key
        mac = hmac.new(key, body, hashlib.sha256).hexdigest().encode("ascii")
        kept = keptstate.current()
        if kept is not None:
            kept.keep(keptstate.absolute(self.path), body + b"\n" + mac + b"\n")
            return
        atomic_write(self.path, body + b"\n" + mac + b"\n", 0o600, durable=False)

    def delete(self) -> None:
        """Remove the stored state (it is rebuilt from the chain on next use).

        Raises:
            ChainIOError: something is there that cannot be removed.
        """
        kept = keptstate.current()
        if kept is not None:
            kept.keep(keptstate.absolute(self.path), None)
            return
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ChainIOError(f"cannot remove {self.path}: {exc.strerror}") from exc

    # Idempotency keys: one small MAC'd file per key under ``state/keys/``, named
    # by the SHA-256 of the key, so a lookup reads one file whatever the chain's
    # length. Like the state, the index is derived: rebuilt with it from the chain.

    def _key_path(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        return self.keys_dir / digest[:2] / f"{digest}.json"

    @property
    def keys_dir(self) -> Path:
        """Where the idempotency-key index lives."""
        return self.path.parent / "keys"

    def load_key(self, key: str) -> dict[str, Any] | None:
        """The index record of ``key``; ``None`` when absent, unreadable or edited."""
        try:
            raw = read_regular(self._key_path(key))
            mac_key = self._mac_key(create=False)
        except (OSError, ChainIOError):
            return None
        if mac_key is None:
            return None
        body, _, mac = raw.rstrip(b"\n").rpartition(b"\n")
        expected = hmac.new(mac_key, body, hashlib.sha256).hexdigest().encode("ascii")
        if not hmac.compare_digest(expected, mac):
            return None
        try:
            record = json.loads(body)
        except ValueError:
            return None
        if not isinstance(record, dict) or record.get("key") != key:
            return None
        return record

    def save_keys(self, records: list[dict[str, Any]], *, replace: bool = False) -> None:
        """Add idempotency-key records; the first record of a key wins.

        Raises:
            ChainIOError: a file cannot be written.
        """
        if replace and self.keys_dir.exists():
            doomed = self.keys_dir.with_name(f"keys.old-{os.getpid()}")
            self.keys_dir.replace(doomed)
            shutil.rmtree(doomed, ignore_errors=True)
        mac_key = self._mac_key(create=True)
        assert mac_key is not None  # noqa: S101 - create=True always yields a key
        for record in records:
            path = self._key_path(record["key"])
            if path.exists():
                continue
            body = json.dumps(record, sort_keys=True, separators=(",", ":")).encode("utf-8")
            mac = hmac.new(mac_key, body, hashlib.sha256).hexdigest().encode("ascii")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ChainIOError(f"cannot write the idempotency index: {exc}") from exc
            # A key sealed by a call is made durable with it; a bulk rebuild is not
            # (a lost file is refolded from the chain when the state lags), nor is
            # a record that says it need not be.
            durable = not replace and record.get("durable", True) is not False
            atomic_write(path, body + b"\n" + mac + b"\n", 0o600, durable=durable)
