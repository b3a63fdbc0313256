"""The derived-state file's seal: its MAC key (``keys/state-mac.key``) and its bytes.

The file is canonical JSON and, on the next line, its HMAC-SHA256 under a key
of its own (mode 0600), made on the first save; ``ledger.edges.files.statefile``
checks the MAC on load.
"""

import contextlib
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from ledger.edges.fileio import ByIdentity, exclusive_create, file_identity, read_regular
from ledger.edges.files.storedcounters import StoredCounters
from ledger.errors import ChainIOError

_MAC_KEY_BYTES = 32
# MAC keys this process has read, by the identity of their file.
_MAC_KEYS_SEEN: ByIdentity[bytes] = ByIdentity()


def mac_key(path: Path, *, create: bool) -> bytes | None:
    """The MAC key in ``path`` (made when absent and ``create``; else ``None``).

    Raises:
        ChainIOError: the key cannot be read or made.
    """
    # Every verdict loads and saves the state; the key is read again only
    # when its file is another one (``identity_of_stat``).
    identity = file_identity(path)
    known = _MAC_KEYS_SEEN.get(identity)
    if known is not None:
        return known
    key = _read_mac_key(path, create=create)
    if identity is not None and key is not None:
        _MAC_KEYS_SEEN.keep(key, identity)
    return key


def _read_mac_key(path: Path, *, create: bool) -> bytes | None:
    # Read without blocking: a FIFO or a directory in its place is an I/O
    # failure (ChainIOError), never a read that waits forever.
    try:
        return read_regular(path)
    except FileNotFoundError:
        if not create:
            return None
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc
    with contextlib.suppress(FileExistsError):
        exclusive_create(path, os.urandom(_MAC_KEY_BYTES), 0o600)
    try:
        return read_regular(path)
    except OSError as exc:
        raise ChainIOError(f"cannot read {path}: {exc.strerror}") from exc


def sealed(document: dict[str, Any], mac_key: bytes) -> bytes:
    """A state document as its file holds it: canonical JSON, then its MAC, a line each."""
    body = json.dumps(document, sort_keys=True, separators=(",", ":"), default=_in_buckets).encode(
        "utf-8"
    )
    mac = hmac.new(mac_key, body, hashlib.sha256).hexdigest().encode("ascii")
    return body + b"\n" + mac + b"\n"


def _in_buckets(value: object) -> None:
    # Counters kept in their buckets are named by the buckets' sizes, not inlined.
    if isinstance(value, StoredCounters):
        return
    raise TypeError(f"cannot store {type(value).__name__} in the derived state")
