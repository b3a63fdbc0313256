"""Hosts of a fleet: ``ledger init`` and ``ledger keys enroll`` with a database store (SPEC §8).

Each host keeps its own home and writer key; the trust store listing every
host's key lives in the database. Enrolment adds this host's key to it under
the chain lock, so two hosts enrolling at once never lose one another's key.
A trust store that an offline root signed stays signed: enrolment then needs
that root (``--root-key``), and pins it in this home when it was not pinned.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ledger.core.config_template import config_template, host_config_template, store_section
from ledger.core.signing import Signer
from ledger.core.trust import TrustedKey, TrustStore, TrustStoreError, trust_from_document
from ledger.core.units import usd_to_micros
from ledger.errors import KeyFileError, UsageError
from ledger.services.chain.home import RotateDeps, carry_if_only_widened
from ledger.services.chain.init_options import checked_billing, checked_cap


class FleetKeys(Protocol):
    """This host's keys and the fleet's trust store."""

    def trust_bytes(self) -> bytes | None:
        """The stored trust document, or ``None`` before the first host."""
        ...

    def load_trust(self) -> TrustStore:
        """The fleet's trust store."""
        ...

    def save_trust(self, store: TrustStore, root: Signer | None = None) -> None:
        """Replace the fleet's trust store."""
        ...

    def active_signer(self, trust: TrustStore) -> Signer:
        """This host's enrolled signing key."""
        ...

    def unenrolled_key(self, trust: TrustStore | None) -> Signer | None:
        """A key of this home the trust store does not list."""
        ...

    def generate(self) -> Signer:
        """Make a new key in this home."""
        ...

    def pinned_root(self) -> bytes | None:
        """The offline root this home pins."""
        ...


class SharedSecret(Protocol):
    """This host's copy of the secret that authenticates the fleet's derived state."""

    path: Path

    def join(self) -> bool:
        """Make sure this home holds the fleet's secret; whether it was made here."""
        ...


class EnrollDeps(RotateDeps, Protocol):
    """What enrolling a fleet host needs."""

    @property
    def fleet_secret(self) -> SharedSecret:
        """This host's copy of the fleet's secret."""
        ...


class Database(Protocol):
    """The fleet's database."""

    display: str

    def ensure_schema(self) -> bool:
        """Create the schema when missing; whether it was created."""
        ...


class FleetDeps(EnrollDeps, Protocol):
    """What initialising a fleet host needs."""

    @property
    def home(self) -> Path:
        """The home directory."""
        ...

    @property
    def config_path(self) -> Path:
        """Where ``ledger.toml`` lives."""
        ...

    @property
    def database(self) -> Database:
        """The fleet's database."""
        ...

    def write_file(self, path: Path, data: bytes) -> None:
        """Write a whole file atomically."""
        ...

    @property
    def fleet_caps(self) -> dict[str, Any] | None:
        """The caps and budgets pushed to the fleet's store (``ledger config push``)."""
        ...


@dataclass(frozen=True, slots=True)
class EnrollResult:
    """What ``init`` or ``keys enroll`` did with this host's key."""

    key_id: str | None
    created_key: bool
    enrolled: bool
    already_enrolled: bool
    root_signed: bool
    message: str | None = None
    secret_created: bool = False


@dataclass(frozen=True, slots=True)
class FleetInitResult:
    """What ``ledger init`` did on a fleet host."""

    home: str
    created_config: bool
    created_schema: bool
    store: str
    enrolment: EnrollResult
    fleet_caps: bool = False  # the fleet's store holds pushed caps: this host decides under them


def init_fleet(
    deps: FleetDeps, daily_cap_usd: str | None, url: str, schema: str, billing: str | None = None
) -> FleetInitResult:
    """Create this host's home and config, the schema when missing, and enrol its key.

    Enrolment is left to ``ledger keys enroll --root-key`` when the fleet's
    trust store is root-signed (the result says so).

    Raises:
        UsageError: ``daily_cap_usd`` is not a number ≥ 0.
        StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
        StoreSchemaError: the schema is newer than this code knows.
    """
    cap = checked_cap(daily_cap_usd)
    fleet = deps.fleet_caps
    if fleet is not None and cap is not None:
        pushed = fleet.get("usd", {}).get("daily_cap")
        if pushed is None or usd_to_micros(pushed) != cap:
            raise UsageError(
                f"--daily-cap-usd {daily_cap_usd}: this fleet's usd.daily_cap is {pushed} "
                "(its store holds the fleet's caps; `ledger config push` changes them)"
            )
    created_config = False
    if not deps.config_path.exists():
        billing_mode = checked_billing(billing)
        head = (
            config_template(daily_cap_usd, billing_mode)
            if fleet is None
            else host_config_template(billing_mode)
        )
        text = head + store_section(url, schema)
        deps.write_file(deps.config_path, text.encode("utf-8"))
        created_config = True
    created_schema = deps.database.ensure_schema()
    enrolment = enroll(deps, None, pin=None, allow_pending=True)
    return FleetInitResult(
        str(deps.home), created_config, created_schema, deps.database.display, enrolment,
        fleet_caps=fleet is not None,
    )  # fmt: skip


def enroll(
    deps: EnrollDeps,
    root: Signer | None,
    pin: Callable[[bytes], None] | None,
    *,
    allow_pending: bool = False,
) -> EnrollResult:
    """Add this host's writer key to the fleet's trust store (a no-op when it is there).

    The first host's key starts the trust store, and its secret the fleet's
    (made in its home when it has none); every other host must hold a copy of
    that secret first. A root-signed trust store (or a home that pins a root)
    takes a new key only with that root, which signs the new version; an
    unpinned home then pins it with ``pin``.

    Raises:
        FleetSecretMissingError: this home lacks the fleet's secret (a KeyFileError).
        KeyFileError: a root is needed and not given (unless ``allow_pending``,
            which returns a result saying so), or another root is given.
        StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
    """
    keys: FleetKeys = deps.keys  # type: ignore[assignment]
    with deps.chain.transaction():
        made = deps.fleet_secret.join()
        stored = keys.trust_bytes()
        if stored is None:
            signer = keys.unenrolled_key(None)
            created = signer is None
            signer = signer or keys.generate()
            first = TrustedKey(signer.key_id, signer.public_raw)
            # From the fleet's first enrolment on, every entry must be signed.
            keys.save_trust(TrustStore(keys=(first,), strict_after=deps.clock.now()), root)
            return EnrollResult(
                signer.key_id, created, True, False, root is not None, secret_created=made
            )
        trust = keys.load_trust()
        signed = _root_signed(stored)
        try:
            own = keys.active_signer(trust)
        except KeyFileError:
            own = None
        if own is not None:
            return EnrollResult(own.key_id, False, False, True, signed, secret_created=made)
        pinned = keys.pinned_root()
        if (signed or pinned is not None) and root is None:
            if allow_pending:
                return EnrollResult(
                    None, False, False, False, signed,
                    "the fleet's trust store is signed by an offline root: "
                    "run `ledger keys enroll --root-key PEM` to enrol this host", made,
                )  # fmt: skip
            raise KeyFileError(
                "the fleet's trust store is signed by an offline root: "
                "enrol with --root-key <its private key PEM>"
            )
        if root is not None and pinned is not None and root.public_raw != pinned:
            raise KeyFileError("this home pins a different root key")
        if root is not None and signed and not root_signed_by(stored, root.public_raw):
            # Re-signing with any key that happens to be given would hand the
            # fleet's trust to whoever holds it: only the root that signed stays.
            raise KeyFileError(
                "the given root key did not sign the fleet's trust store; "
                "enrol with the offline root that signed it"
            )
        signer = keys.unenrolled_key(trust)
        created = signer is None
        signer = signer or keys.generate()
        enrolled = trust.with_key(TrustedKey(signer.key_id, signer.public_raw))
        keys.save_trust(enrolled, root)
        # One key more verifies every entry it did: the fleet's state is carried
        # over, so no host's next verdict verifies the whole chain again.
        carry_if_only_widened(deps, trust, enrolled)
    if root is not None and pinned is None and pin is not None:
        pin(root.public_raw)
    return EnrollResult(signer.key_id, created, True, False, root is not None, secret_created=made)


def root_signed_by(document: bytes, root_public: bytes) -> bool:
    """Whether the stored trust document carries a valid signature of ``root_public``."""
    try:
        trust_from_document(json.loads(document), pinned_root=root_public)
    except (ValueError, RecursionError, TrustStoreError):
        return False
    return True


def _root_signed(document: bytes) -> bool:
    try:
        parsed = json.loads(document)
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get("root_signature") is not None
