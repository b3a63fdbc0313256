"""Gateway keys: issue, list, revoke, and resolve the key a gateway request presents.

Issuing and revoking a key each seal an entry in the chain
(``gateway.key_issued`` / ``gateway.key_revoked``: name, a prefix of the secret's
SHA-256, agent, tags, expiry; never the secret), so an auditor sees from the
chain alone who could spend when. The entry is sealed under the chain lock
before the key store changes: a key never works without its entry (on a fleet
both are one database transaction).
"""

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ledger.core.config import Config
from ledger.core.gateway_keys import (
    KEY_ISSUED,
    KEY_REVOKED,
    GatewayKey,
    new_key,
    resolve,
    resolve_any,
    revoked,
)
from ledger.core.key_caps import parse_key_cap
from ledger.services.chain.writer import Writer, WriterDeps
from ledger.services.ports import Clock


class GatewayKeyStore(Protocol):
    """Where a home's (or a fleet's) gateway keys are kept."""

    def load(self) -> list[GatewayKey]:
        """Every issued key."""
        ...

    def change(self, edit: Callable[[list[GatewayKey]], list[GatewayKey]]) -> None:
        """Replace the keys with ``edit(keys)`` atomically."""
        ...

    def new_secret(self) -> str:
        """A fresh secret."""
        ...


class GatewayKeyDeps(Protocol):
    """What the key commands need."""

    @property
    def clock(self) -> Clock:
        """The clock."""
        ...

    @property
    def gateway_keys(self) -> GatewayKeyStore:
        """The key store."""
        ...


class KeyChangeDeps(GatewayKeyDeps, WriterDeps, Protocol):
    """What issuing and revoking need: the key store and the chain they are sealed in."""


class KeyCapDeps(KeyChangeDeps, Protocol):
    """What issuing a key with its own cap needs: the configuration to write it in too."""

    @property
    def config(self) -> Config:
        """The configuration (its budgets)."""
        ...

    def set_usd_for(self, budget: str, value: str, usd: float) -> None:
        """Give ``value`` its own cap in budget ``budget`` (its ``usd_for``)."""
        ...


def issue_key(
    deps: KeyChangeDeps, name: str, agent: str | None = None, tags: Sequence[str] = (),
    expires: dt.datetime | None = None, role: str | None = None,
) -> tuple[GatewayKey, str]:  # fmt: skip
    """Issue a key; returns it and its secret (shown once, never stored).

    With a ``role`` (``admin`` or ``viewer``) the key is a console key
    (``lc_...``): it signs in to the console and the gateway refuses it.

    Raises:
        UsageError: a bad or already issued name, or an expiry in the past.
        LockTimeoutError, ChainIOError: the entry could not be sealed (no key issued).
    """
    return _issue(deps, name, agent, tags, expires, role, lambda: None)


def issue_capped_key(
    deps: KeyCapDeps, name: str, budget: str, agent: str | None = None,
    tags: Sequence[str] = (), expires: dt.datetime | None = None,
) -> tuple[GatewayKey, str]:  # fmt: skip
    """Issue a gateway key with its own cap in a ``per = "key"`` budget (``NAME=USD``).

    The key's ``usd_for`` entry is written into the configuration first, once
    the name is known to be free, so the key never works without its cap.

    Raises:
        UsageError: as ``issue_key``, or a ``budget`` that is not ``NAME=USD``
            of a budget with ``per = "key"``.
        ConfigError: the configuration cannot be read, or the cap cannot be
            written (no key issued).
        LockTimeoutError, ChainIOError: the entry could not be sealed (no key issued).
    """
    cap = parse_key_cap(budget, deps.config.budgets)
    return _issue(
        deps, name, agent, tags, expires, None,
        lambda: deps.set_usd_for(cap.budget, name, cap.usd),
    )  # fmt: skip


def _issue(
    deps: KeyChangeDeps, name: str, agent: str | None, tags: Sequence[str],
    expires: dt.datetime | None, role: str | None, before_seal: Callable[[], None],
) -> tuple[GatewayKey, str]:  # fmt: skip
    store = deps.gateway_keys
    secret = store.new_secret()
    if role is not None:
        secret = "lc_" + secret.removeprefix("lk_")
    now = deps.clock.now()
    made: list[GatewayKey] = []
    writer = Writer(deps)
    with deps.chain.transaction() as tx:

        def add(keys: list[GatewayKey]) -> list[GatewayKey]:
            made.append(new_key(keys, name, secret, agent, tags, expires, now, role))
            before_seal()
            writer.append(tx, KEY_ISSUED, made[0].sealed())
            return [*keys, made[0]]

        store.change(add)
    return made[0], secret


def list_keys(deps: GatewayKeyDeps) -> list[dict[str, Any]]:
    """Every issued key as ``keys list`` prints it (never a secret or digest)."""
    now = deps.clock.now()
    return [key.shown(now) for key in deps.gateway_keys.load()]


def revoke_key(deps: KeyChangeDeps, name: str) -> dict[str, Any]:
    """Revoke a key from now on; returns it as listed.

    Raises:
        UsageError: no such key, or revoked already.
        LockTimeoutError, ChainIOError: the entry could not be sealed (nothing revoked).
    """
    now = deps.clock.now()
    writer = Writer(deps)
    with deps.chain.transaction() as tx:

        def revoke(keys: list[GatewayKey]) -> list[GatewayKey]:
            changed = revoked(keys, name, now)
            key = next(key for key in changed if key.name == name)
            writer.append(tx, KEY_REVOKED, key.sealed())
            return changed

        deps.gateway_keys.change(revoke)
    return next(key.shown(now) for key in deps.gateway_keys.load() if key.name == name)


def resolve_gateway_key(deps: GatewayKeyDeps, secret: str) -> GatewayKey:
    """The key a gateway request presents.

    Raises:
        GatewayKeyError: unknown, revoked or expired (answer 401).
    """
    return resolve(deps.gateway_keys.load(), secret, deps.clock.now())


def resolve_console_key(deps: GatewayKeyDeps, secret: str) -> GatewayKey:
    """The key (console or gateway) a console sign-in presents.

    Raises:
        GatewayKeyError: malformed, unknown, revoked or expired.
    """
    return resolve_any(deps.gateway_keys.load(), secret, deps.clock.now())
