"""Creating a home, rotating its writer key and revoking a retired one."""

import base64
import contextlib
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ledger.core.config_template import config_template
from ledger.core.signing import Signer
from ledger.core.timefmt import format_ts, parse_ts
from ledger.core.trust import Revocation, TrustedKey, TrustStore, only_widens, trust_fingerprint
from ledger.errors import ChainIOError, KeyFileError, LedgerError, UsageError
from ledger.services.chain.init_options import checked_billing, checked_cap
from ledger.services.chain.revocation import fails_an_entry, fails_the_checkpoint
from ledger.services.chain.verify import head_bound
from ledger.services.chain.writer import Writer, WriterDeps
from ledger.services.ports import ChainTx, StateStore

if TYPE_CHECKING:
    from ledger.core.checkpoint import Checkpoint
    from ledger.core.verified_mark import VerifiedMark


class HomeDeps(WriterDeps, Protocol):
    """What creating a home needs beyond appending."""

    @property
    def home(self) -> Path:
        """The home directory."""
        ...

    @property
    def config_path(self) -> Path:
        """Where ``ledger.toml`` lives."""
        ...

    def write_file(self, path: Path, data: bytes) -> None:
        """Write a whole file atomically."""
        ...

    def has_trust_store(self) -> bool:
        """Whether the home already has a trust store."""
        ...


@dataclass(frozen=True, slots=True)
class InitResult:
    """What ``ledger init`` created or found."""

    home: str
    key_id: str
    created_key: bool
    created_config: bool


def init_home(deps: HomeDeps, daily_cap_usd: str | None, billing: str | None = None) -> InitResult:
    """Create the home, its config, a writer key and the trust store.

    An existing key, trust store or config is kept as it is. ``billing`` is
    ``"none"`` for a home that counts its own records only (``--billing none``).

    Raises:
        UsageError: ``daily_cap_usd`` is not a number ≥ 0.
        KeyFileError: an existing key or trust store is unusable.
        ChainIOError: a file cannot be written.
    """
    checked_cap(daily_cap_usd)
    home = deps.home
    created_config = False
    if not deps.config_path.exists():
        text = config_template(daily_cap_usd, checked_billing(billing))
        deps.write_file(deps.config_path, text.encode("utf-8"))
        created_config = True
    keys = deps.keys
    if deps.has_trust_store():
        signer = keys.active_signer(keys.load_trust())
        return InitResult(str(home), signer.key_id, False, created_config)
    signer = keys.generate()
    # The first key is valid from the beginning of time: entries replayed with
    # LEDGER_NOW before the moment of init must still verify. From init on,
    # every entry must be signed: an unsigned line appended by anyone who can
    # write the file would otherwise verify and be folded.
    keys.save_trust(
        TrustStore(
            keys=(TrustedKey(signer.key_id, signer.public_raw),),
            strict_after=deps.clock.now(),
        )
    )
    return InitResult(str(home), signer.key_id, True, created_config)


def ensure_strict_after(deps: WriterDeps, root: Signer | None = None) -> str | None:
    """Give a trust store without ``strict_after`` (an older home) one: now.

    Returns a note for the operator when the trust store changed, or could not
    be changed because it needs the offline root; ``None`` when there was
    nothing to do.

    Raises:
        InputDataError: the trust store is unreadable.
        ChainIOError: the trust store could not be written.
    """
    keys = deps.keys
    trust = keys.load_trust()
    if trust.strict_after is not None:
        return None
    pinned = keys.pinned_root()
    if pinned is not None and (root is None or root.public_raw != pinned):
        return (
            "the trust store accepts unsigned entries (no strict_after); "
            "give --root-key to any keys command to refuse them from now on"
        )
    now = deps.clock.now()
    keys.save_trust(trust.with_strict_after(now), root)
    return f"the trust store now refuses unsigned entries from {format_ts(now)} (strict_after)"


@dataclass(frozen=True, slots=True)
class RotateResult:
    """The outcome of ``ledger keys rotate``."""

    old_key_id: str
    new_key_id: str
    rotated_at: str
    entry_hash: str


class RotateDeps(WriterDeps, Protocol):
    """What a rotation needs beyond appending: the derived state it carries over."""

    @property
    def states(self) -> StateStore:
        """The derived state."""
        ...


def rotate_key(deps: RotateDeps, root: Signer | None = None) -> RotateResult:
    """Make a new writer key; the old one signs a ``ledger.key_rotated`` naming it.

    The event is appended first and the trust store replaced after: a crash in
    between leaves the old key active and the chain verifying. The derived state
    verified under the old trust store is carried over to the new one, with its
    points and the rollups: the old key stays valid up to the rotation, so every
    entry it vouches for still verifies, and nothing is rebuilt.

    Raises:
        KeyFileError: no active key to rotate from.
        LockTimeoutError: the chain lock stayed busy.
        ChainIOError: the chain, the new key or the trust store could not be
            written; the old key stays active and the chain still verifies.
    """
    keys = deps.keys
    trust = keys.load_trust()
    old = keys.active_signer(trust)
    pinned = keys.pinned_root()
    if pinned is not None and (root is None or root.public_raw != pinned):
        # An unsigned (or wrongly signed) trust store would lock every command out.
        raise KeyFileError(
            "this home pins an offline root key: rotate with --root-key <its private key PEM>"
        )
    writer = Writer(deps)
    with deps.chain.transaction() as tx:
        # A chain that cannot be appended to is found before a key is made, so
        # a failed rotation leaves no orphaned key file behind.
        tx.head()
        new = keys.generate()
        sealed = writer.append(
            tx,
            "ledger.key_rotated",
            {
                "old_key_id": old.key_id,
                "new_key_id": new.key_id,
                "new_public_key": base64.b64encode(new.public_raw).decode("ascii"),
            },
            signer=old,
        )
        moment = parse_ts(sealed.ts_utc)
        rotated = trust.ends_validity(old.key_id, moment).with_key(
            TrustedKey(new.key_id, new.public_raw, moment, None)
        )
        keys.save_trust(rotated, root)
        _carry_state_over(deps.states, trust, rotated)
        _carry_derived_over(deps, trust, rotated)
    return RotateResult(old.key_id, new.key_id, sealed.ts_utc, sealed.entry_hash)


def carry_if_only_widened(deps: RotateDeps, before: TrustStore, after: TrustStore) -> None:
    """Carry the derived state over to ``after`` when it can fail no verified entry.

    Called under the chain lock, right after the trust store became ``after``:
    a trust store that only adds keys (``only_widens``) leaves every verified
    entry verified, so nothing is verified or folded again, and no verdict
    waits for it. Any other change is left to the next load, which verifies
    the chain again.
    """
    if only_widens(before, after):
        _carry_state_over(deps.states, before, after)
        _carry_derived_over(deps, before, after)


def _carry_state_over(states: StateStore, before: TrustStore, after: TrustStore) -> None:
    """Mark a state verified under ``before`` as verified under ``after`` (a rotation).

    Only a state whose integrity check passes and that names ``before`` is
    carried over; any other is left to the next load, which judges it. A state
    that cannot be written is left too: it is rebuilt then, as before.
    """
    try:
        stored = states.load()
    except LedgerError:
        return
    if stored is None or stored.data["meta"].get("trust") != trust_fingerprint(before):
        return
    stored.data["meta"]["trust"] = trust_fingerprint(after)
    with contextlib.suppress(LedgerError):
        states.save_state(stored.head_hash, stored.size, stored.data)


def _carry_derived_over(deps: "RotateDeps", before: TrustStore, after: TrustStore) -> None:
    """The state points and the rollups, carried over as the state is (``_carry_state_over``).

    Left as they are when they cannot be: the next reader judges them.
    """
    old, new = trust_fingerprint(before), trust_fingerprint(after)
    carry_points = getattr(deps.states, "carry_points_over", None)
    if carry_points is not None:
        with contextlib.suppress(LedgerError):
            carry_points(old, new)
    rollups = getattr(deps, "rollups", None)
    carry_rollups = getattr(rollups, "carry_trust_over", None)
    if carry_rollups is not None:
        with contextlib.suppress(LedgerError):
            carry_rollups(old, new)
    # The verified mark too, or the next checkpoint and verify-chain would
    # verify from line 1 (hours on a year-old home) for a trust store that
    # fails no entry they verified. It still counts only beside a signed
    # checkpoint that the new trust store accepts.
    mark_of = getattr(deps, "verified_mark", None)
    keep_mark = getattr(deps, "keep_verified_mark", None)
    if mark_of is not None and keep_mark is not None:
        with contextlib.suppress(LedgerError):
            mark = mark_of()
            if mark is not None and mark.trust_sha256 == old:
                keep_mark(replace(mark, trust_sha256=new))


def pin_root(deps: WriterDeps, root: Signer, write_pin: Callable[[bytes], None]) -> str:
    """Sign the trust store with an offline root key and pin that key in the home.

    From then on the home refuses a trust store without the root's signature.

    Raises:
        KeyFileError: the home already pins a different root.
        InputDataError: the trust store is unreadable.
    """
    keys = deps.keys
    pinned = keys.pinned_root()
    if pinned is not None and pinned != root.public_raw:
        raise KeyFileError("this home already pins a different root key")
    keys.save_trust(keys.load_trust(), root)
    write_pin(root.public_raw)
    return root.key_id


class RevokeDeps(RotateDeps, Protocol):
    """What a revocation needs beyond a rotation: the checkpoint and mark it may keep."""

    def newest_checkpoint(self) -> "Checkpoint | None":
        """The newest stored checkpoint."""
        ...

    def verified_mark(self) -> "VerifiedMark | None":
        """Where the newest checkpoint's verification ended, if known."""
        ...

    def keep_verified_mark(self, mark: "VerifiedMark") -> None:
        """Keep where a verification ended."""
        ...


def revoke_key(
    deps: RevokeDeps,
    key_id: str,
    reason: str,
    revoked_at: dt.datetime | None,
    root: Signer | None = None,
) -> None:
    """Revoke a writer key in the trust store (from ``revoked_at``, or entirely).

    When no sealed entry and not the newest checkpoint is signed by the key
    where the revocation fails it, what was verified stays verified and is
    carried over (``ledger.services.chain.revocation``); the lines written
    before are read without the lock, only those appended since under it.

    Raises:
        UsageError: the key is unknown, or is the active writer key.
        KeyFileError: the home pins a root and ``root`` is not it.
        LockTimeoutError: the chain lock stayed busy.
    """
    keys = deps.keys
    before = keys.load_trust()
    _check_revocable(deps, before, key_id, root)
    revocation = Revocation(key_id, revoked_at, reason)
    end = head_bound(deps.chain)
    clean = end is not None and not fails_an_entry(
        deps.chain, before.with_revocation(revocation), key_id, 0, end
    )
    # Under the chain lock, as a rotation: no verdict reads the new trust
    # store before the state verified under the old one is carried over.
    with deps.chain.transaction() as tx:
        trust = keys.load_trust()
        _check_revocable(deps, trust, key_id, root)
        revoked = trust.with_revocation(revocation)
        clean = (
            clean
            and end is not None
            and not fails_an_entry(deps.chain, revoked, key_id, end, _head_size(tx))
            and not fails_the_checkpoint(deps.newest_checkpoint(), revoked)
        )
        keys.save_trust(revoked, root)
        if clean:
            _carry_state_over(deps.states, trust, revoked)
            _carry_derived_over(deps, trust, revoked)


def _head_size(tx: ChainTx) -> int | None:
    """Where the chain ends under the lock; ``None`` (read to the end) when the head is torn."""
    try:
        head = tx.head()
    except ChainIOError:
        return None
    return None if head is None else head.size


def _check_revocable(deps: WriterDeps, trust: TrustStore, key_id: str, root: Signer | None) -> None:
    """Refuse a revocation of an unknown or active key, or one without the pinned root.

    Raises:
        UsageError: the key is unknown, or is the active writer key.
        KeyFileError: the home pins a root and ``root`` is not it.
    """
    keys = deps.keys
    if trust.key(key_id) is None:
        raise UsageError(f"no key {key_id} in the trust store")
    if keys.active_signer(trust).key_id == key_id:
        raise UsageError(f"{key_id} is the active writer key: run `ledger keys rotate` first")
    pinned = keys.pinned_root()
    if pinned is not None and (root is None or root.public_raw != pinned):
        raise KeyFileError("this home pins an offline root key: pass --root-key")


def trust_foreign_key(
    deps: RotateDeps, key_id: str, public_raw: bytes, root: Signer | None = None
) -> bool:
    """Trust another writer's public key (loa's) to verify its entries, never to sign.

    Returns whether the trust store changed (the same key again is a no-op).

    Raises:
        UsageError: the id names a key of this home, or another public key.
        KeyFileError: the home pins a root and ``root`` is not it.
    """
    keys = deps.keys
    # Under the chain lock, as a rotation: no verdict reads the new trust
    # store before the state verified under the old one is carried over.
    with deps.chain.transaction():
        trust = keys.load_trust()
        known = trust.key(key_id)
        if known is not None:
            if known.public_raw == public_raw and not known.signs:
                return False
            raise UsageError(f"the trust store already has a different key {key_id}")
        pinned = keys.pinned_root()
        if pinned is not None and (root is None or root.public_raw != pinned):
            raise KeyFileError("this home pins an offline root key: pass --root-key")
        trusted = trust.with_key(TrustedKey(key_id, public_raw, signs=False))
        # Taking over another writer's log: its entries up to now were written
        # under its own rules, so unsigned entries are refused from the takeover on.
        now = deps.clock.now()
        if trusted.strict_after is None or trusted.strict_after < now:
            trusted = trusted.with_strict_after(now)
        keys.save_trust(trusted, root)
        carry_if_only_widened(deps, trust, trusted)
    return True
