"""Gateway keys: issue, list, revoke, and resolve the key a gateway request presents."""

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ledger.core.gateway_keys import GatewayKey, new_key, resolve, revoked
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


def issue_key(
    deps: GatewayKeyDeps, name: str, agent: str | None = None, tags: Sequence[str] = (),
    expires: dt.datetime | None = None,
) -> tuple[GatewayKey, str]:  # fmt: skip
    """Issue a key; returns it and its secret (shown once, never stored).

    Raises:
        UsageError: a bad or already issued name, or an expiry in the past.
    """
    store = deps.gateway_keys
    secret = store.new_secret()
    now = deps.clock.now()
    made: list[GatewayKey] = []

    def add(keys: list[GatewayKey]) -> list[GatewayKey]:
        made.append(new_key(keys, name, secret, agent, tags, expires, now))
        return [*keys, made[0]]

    store.change(add)
    return made[0], secret


def list_keys(deps: GatewayKeyDeps) -> list[dict[str, Any]]:
    """Every issued key as ``keys list`` prints it (never a secret or digest)."""
    now = deps.clock.now()
    return [key.shown(now) for key in deps.gateway_keys.load()]


def revoke_key(deps: GatewayKeyDeps, name: str) -> dict[str, Any]:
    """Revoke a key from now on; returns it as listed.

    Raises:
        UsageError: no such key, or revoked already.
    """
    now = deps.clock.now()
    deps.gateway_keys.change(lambda keys: revoked(keys, name, now))
    return next(key.shown(now) for key in deps.gateway_keys.load() if key.name == name)


def resolve_gateway_key(deps: GatewayKeyDeps, secret: str) -> GatewayKey:
    """The key a gateway request presents.

    Raises:
        GatewayKeyError: unknown, revoked or expired (answer 401).
    """
    return resolve(deps.gateway_keys.load(), secret, deps.clock.now())
