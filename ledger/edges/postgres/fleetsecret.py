"""The hosts' shared secret that authenticates a fleet's derived state (SPEC §8).

On one host the derived state is MAC'd with a key in the home; in a fleet
the state is one row every host reads and writes, so every host needs the
same key. It is ``keys/fleet.secret`` (32 random bytes, mode 0600) in each
host's home: made by the first host's ``ledger init`` against an empty store
and copied by the operator to every other host before it joins. It is never
written to the database: whoever can change rows by SQL but holds no host's
secret cannot make a state row the hosts accept.

The database keeps only a check value (an HMAC of a fixed text under the
secret), so a host can tell "my secret is missing or is not the fleet's"
from "the row was edited", and says so.
"""

import contextlib
import hashlib
import hmac
import os
import stat
from pathlib import Path

from ledger.edges.fileio import ByIdentity, exclusive_create, identity_of_stat, read_regular
from ledger.edges.postgres.db import PgDatabase
from ledger.errors import ChainIOError, KeyFileError

SECRET_BYTES = 32
FILE_NAME = "fleet.secret"
_CHECK_TEXT = b"ledger fleet secret check v1"
# Secrets this process has read, by the identity of their file.
_SEEN: ByIdentity[bytes] = ByIdentity()


class FleetSecretMissingError(KeyFileError):
    """This host has no copy of the fleet's secret, or not the fleet's one."""


def check_value(secret: bytes) -> str:
    """What the database keeps to recognise the secret (it does not reveal it)."""
    return hmac.new(secret, _CHECK_TEXT, hashlib.sha256).hexdigest()


def mac(secret: bytes, label: bytes, body: bytes) -> bytes:
    """HMAC-SHA256 of ``body`` under the secret, ``label`` keeping kinds of rows apart."""
    return hmac.new(secret, label + b"\n" + body, hashlib.sha256).hexdigest().encode("ascii")


class FleetSecret:
    """This host's copy of the fleet's secret, and the check value in the database."""

    def __init__(self, path: Path, db: PgDatabase) -> None:
        self.path = path
        self.db = db

    def _missing(self) -> FleetSecretMissingError:
        return FleetSecretMissingError(
            f"no fleet secret at {self.path}: copy keys/{FILE_NAME} from a host of this fleet "
            "(mode 0600) before this host joins it"
        )

    def read(self) -> bytes | None:
        """The secret, or ``None`` when this home has none.

        Raises:
            KeyFileError: the file is unreadable, not 32 bytes, or readable by
                group or others.
        """
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise KeyFileError(f"cannot read {self.path}: {exc.strerror}") from exc
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyFileError(
                f"{self.path} is accessible by others (mode {stat.S_IMODE(info.st_mode):04o}); "
                "chmod 600 it"
            )
        identity = identity_of_stat(info)
        known = _SEEN.get(identity)
        if known is not None:
            return known
        try:
            secret = read_regular(self.path)
        except OSError as exc:
            raise KeyFileError(f"cannot read {self.path}: {exc.strerror}") from exc
        if len(secret) != SECRET_BYTES:
            raise KeyFileError(f"{self.path} is not a fleet secret ({SECRET_BYTES} bytes)")
        _SEEN.keep(secret, identity)
        return secret

    def require(self) -> bytes:
        """The secret.

        Raises:
            FleetSecretMissingError: this home has none.
            KeyFileError: the file is unusable.
        """
        secret = self.read()
        if secret is None:
            raise self._missing()
        return secret

    def stored_check(self) -> str | None:
        """The check value the fleet's first host left in the database, if any."""
        rows = self.db.execute("SELECT check_value FROM fleet_secret WHERE id = 1")
        return str(rows[0][0]) if rows else None

    def join(self) -> bool:
        """Make sure this home holds the fleet's secret; whether it was made here.

        The first host (no check value stored yet) makes the secret when its
        home has none and stores its check value; every later host must
        already hold a copy with the same check value.

        Raises:
            FleetSecretMissingError: the fleet has a secret and this home has
                none, or another one (nothing is written).
            KeyFileError: the file is unusable.
            ChainIOError: the file cannot be written.
            StoreUnreachableError, LockTimeoutError: the database failed.
        """
        stored = self.stored_check()
        secret = self.read()
        made = False
        if stored is None:
            if secret is None:
                secret, made = self._create(), True
            self.db.execute(
                "INSERT INTO fleet_secret (id, check_value) VALUES (1, %s)"
                " ON CONFLICT (id) DO NOTHING",
                (check_value(secret),),
            )
            stored = self.stored_check()
        if secret is None:
            raise self._missing()
        if stored != check_value(secret):
            raise FleetSecretMissingError(
                f"{self.path} is not this fleet's secret (its check value differs from the "
                f"one in {self.db.display}): copy keys/{FILE_NAME} from a host of this fleet"
            )
        return made

    def differs_from_fleet(self, secret: bytes) -> bool:
        """Whether ``secret`` is known not to be the fleet's (its check value differs)."""
        stored = self.stored_check()
        return stored is not None and stored != check_value(secret)

    def _create(self) -> bytes:
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ChainIOError(f"cannot create {self.path.parent}: {exc.strerror}") from exc
        with contextlib.suppress(FileExistsError):
            exclusive_create(self.path, os.urandom(SECRET_BYTES), 0o600)
        return self.require()
