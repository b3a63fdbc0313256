"""Gateway keys: the secrets agents present to ``ledger proxy`` instead of a provider key.

A key is issued once (``lk_`` and 43 URL-safe characters, 256 bits from the
operating system) and only the SHA-256 of the secret is kept: with that much
entropy a plain digest cannot be reversed, and a stolen key file issues no
request. Each key names the agent and tags its requests are scoped by and may
expire; a revoked key stays listed, so its name is never reused by mistake.
"""

import datetime as dt
import hashlib
import hmac
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from ledger.core.timefmt import format_ts, parse_ts
from ledger.errors import GatewayKeyError, InputDataError, UsageError

KEYS_FORMAT = "ledger-gateway-keys/1"
SECRET_RE = re.compile(r"^lk_[A-Za-z0-9_-]{43}$")
# Console keys (``--role admin|viewer``) sign in to the console and spend nothing:
# a prefix of their own, so neither kind is ever taken for the other.
CONSOLE_SECRET_RE = re.compile(r"^lc_[A-Za-z0-9_-]{43}$")
ROLES = ("admin", "viewer")
NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


SEALED_DIGEST_CHARS = 16
KEY_ISSUED = "gateway.key_issued"
KEY_REVOKED = "gateway.key_revoked"


class GatewayKey(NamedTuple):
    """One issued key as kept (never the secret itself)."""

    name: str
    agent: str | None
    tags: tuple[str, ...]
    expires: str | None
    created: str
    revoked_at: str | None
    digest: str
    role: str | None = None  # a console key's role; None for a gateway key

    @property
    def bound_agent(self) -> str:
        """The agent every request with this key is scoped by: its own, else the key's name.

        A key never leaves the agent open for its holder to choose (a key from
        before this rule, issued without one, is bound to its name too).
        """
        return self.agent if self.agent is not None else self.name

    def as_json(self) -> dict[str, Any]:
        """The key as the key file holds it."""
        kept = {
            "name": self.name, "agent": self.agent, "tags": list(self.tags),
            "expires": self.expires, "created": self.created, "revoked_at": self.revoked_at,
            "sha256": self.digest,
        }  # fmt: skip
        return kept if self.role is None else {**kept, "role": self.role}

    def sealed(self) -> dict[str, Any]:
        """The key as the chain records it: who could spend, as whom, until when.

        Never the secret, nor the whole digest: a prefix of the digest tells keys
        apart for an auditor without helping anyone test a guessed secret offline.
        """
        sealed = {
            "name": self.name, "sha256_prefix": self.digest[:SEALED_DIGEST_CHARS],
            "agent": self.agent, "tags": list(self.tags), "expires": self.expires,
        }  # fmt: skip
        return sealed if self.role is None else {**sealed, "role": self.role}

    def shown(self, now: dt.datetime) -> dict[str, Any]:
        """The key as ``keys list`` prints it: everything but the digest, and its state.

        The agent is the one its requests are made as (its name, for a key kept
        from before keys were bound to one).
        """
        return {
            "name": self.name, "agent": self.bound_agent, "tags": list(self.tags),
            "expires": self.expires, "created": self.created, "revoked_at": self.revoked_at,
            "state": self.state(now), "role": self.role or "gateway",
        }  # fmt: skip

    def state(self, now: dt.datetime) -> str:
        """``active``, ``revoked`` or ``expired`` at ``now``."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires is not None and parse_ts(self.expires) <= now:
            return "expired"
        return "active"


def digest_of(secret: str) -> str:
    """The SHA-256 of a secret, as kept."""
    return hashlib.sha256(secret.encode()).hexdigest()


def keys_from_document(document: Any, where: str) -> list[GatewayKey]:
    """The keys of a key file's JSON.

    Raises:
        InputDataError: the document is not a key file of this format.
    """
    try:
        if document["format"] != KEYS_FORMAT:
            raise ValueError(document["format"])
        return [
            GatewayKey(
                str(item["name"]),
                item["agent"],
                tuple(item["tags"]),
                item["expires"],
                str(item["created"]),
                item["revoked_at"],
                str(item["sha256"]),
                _role(item.get("role")),
            )
            for item in document["keys"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputDataError(f"{where}: not a gateway key file ({exc!r})") from exc


def _role(value: Any) -> str | None:
    if value is not None and value not in ROLES:
        raise ValueError(f"role {value!r}")
    return None if value is None else str(value)


def keys_document(keys: Sequence[GatewayKey]) -> dict[str, Any]:
    """A key file's JSON."""
    return {"format": KEYS_FORMAT, "keys": [key.as_json() for key in keys]}


def new_key(
    keys: Sequence[GatewayKey], name: str, secret: str, agent: str | None,
    tags: Sequence[str], expires: dt.datetime | None, now: dt.datetime, role: str | None = None,
) -> GatewayKey:  # fmt: skip
    """A key to add for ``secret``; without ``agent``, its agent is its ``name``.

    Raises:
        UsageError: a bad name, a name already issued (revoked ones included),
            or an expiry that is not in the future.
    """
    if not NAME_RE.fullmatch(name):
        raise UsageError(f"NAME: {name!r} must match ^[a-z][a-z0-9_-]{{0,63}}$")
    if any(key.name == name for key in keys):
        raise UsageError(f"a gateway key named {name!r} was already issued; pick another name")
    if expires is not None and expires <= now:
        raise UsageError("--expires: must be in the future")
    if role is not None and role not in ROLES:
        raise UsageError(f"--role: {role!r} must be admin or viewer")
    return GatewayKey(
        name, name if agent is None else agent, tuple(dict.fromkeys(tags)),
        None if expires is None else format_ts(expires), format_ts(now), None, digest_of(secret),
        role,
    )  # fmt: skip


def revoked(keys: Sequence[GatewayKey], name: str, now: dt.datetime) -> list[GatewayKey]:
    """The keys with ``name`` revoked from ``now``.

    Raises:
        UsageError: no key has that name, or it is revoked already.
    """
    found = [key for key in keys if key.name == name]
    if not found:
        raise UsageError(f"no gateway key named {name!r} (see `ledger keys list`)")
    if found[0].revoked_at is not None:
        raise UsageError(f"gateway key {name!r} was revoked at {found[0].revoked_at}")
    return [key._replace(revoked_at=format_ts(now)) if key.name == name else key for key in keys]


def resolve(keys: Sequence[GatewayKey], secret: str, now: dt.datetime) -> GatewayKey:
    """The key a request presents, if it may be used at ``now``.

    Raises:
        GatewayKeyError: the secret is malformed or unknown, or its key is
            revoked or expired (the message never repeats the secret).
    """
    if CONSOLE_SECRET_RE.fullmatch(secret):
        raise GatewayKeyError("a console key is not a gateway key (lk_...)")
    if not SECRET_RE.fullmatch(secret):
        raise GatewayKeyError("not a gateway key (lk_...)")
    key = resolve_any(keys, secret, now, kind="gateway key")
    if key.role is not None:  # a console key whose secret was given the gateway's prefix
        raise GatewayKeyError("a console key is not a gateway key (lk_...)")
    return key


def resolve_any(
    keys: Sequence[GatewayKey], secret: str, now: dt.datetime, *, kind: str = "key"
) -> GatewayKey:
    """The key (gateway or console) a console sign-in presents, if usable at ``now``.

    ``kind`` names what was looked for in the message for a secret no key has.

    Raises:
        GatewayKeyError: malformed, unknown, revoked or expired.
    """
    if not (SECRET_RE.fullmatch(secret) or CONSOLE_SECRET_RE.fullmatch(secret)):
        raise GatewayKeyError("not a key (lk_... or lc_...)")
    digest = digest_of(secret)
    for key in keys:
        if hmac.compare_digest(key.digest, digest):
            state = key.state(now)
            if state != "active":
                raise GatewayKeyError(f"key {key.name!r} is {state}")
            return key
    raise GatewayKeyError(f"unknown {kind}")
