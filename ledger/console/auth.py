"""Who is asking: the one-time sign-in token, sessions, bearer keys, and sign-in limits.

Sessions live in the console's memory (a restart signs everyone out); a session
made with a key ends as soon as that key is revoked or expires. Every session
has its own CSRF token, which every cookie-authenticated POST must carry.
"""

import datetime as dt
import hmac
import secrets
import threading
import time
from collections import deque
from typing import Any, NamedTuple

from ledger.errors import GatewayKeyError

TOKEN_SECONDS = 600
MAX_FAILURES = 5  # per address in FAILURE_WINDOW_SECONDS
FAILURE_WINDOW_SECONDS = 60.0
COOKIE = "ledger_console"
ROLE_KEY = "key"  # a gateway key's holder: its own view only


class Principal(NamedTuple):
    """A signed-in caller: ``admin``, ``viewer`` or ``key`` (a gateway key's holder)."""

    role: str
    name: str  # the key's name, or ``token`` for the one-time sign-in
    key: Any  # the GatewayKey, or None for the one-time token
    csrf: str | None  # None for a bearer request (no cookie, no CSRF)


class _Session(NamedTuple):
    principal: Principal
    expires: float


class Auth:
    """Sign-in state of one console process."""

    def __init__(self, session_hours: float) -> None:
        self._lock = threading.Lock()
        self._session_seconds = session_hours * 3600
        self._sessions: dict[str, _Session] = {}
        self._failures: dict[str, deque[float]] = {}
        self._token: str | None = secrets.token_urlsafe(32)
        self._token_until = time.monotonic() + TOKEN_SECONDS

    @property
    def session_seconds(self) -> int:
        """How long a sign-in lasts."""
        return int(self._session_seconds)

    def one_time_token(self) -> str:
        """The sign-in token printed at start (valid once, for ten minutes)."""
        assert self._token is not None  # noqa: S101 - only read at start
        return self._token

    def limited(self, address: str) -> bool:
        """Whether this address failed too often lately."""
        with self._lock:
            seen = self._failures.get(address)
            if not seen:
                return False
            while seen and seen[0] < time.monotonic() - FAILURE_WINDOW_SECONDS:
                seen.popleft()
            return len(seen) >= MAX_FAILURES

    def failed(self, address: str) -> None:
        """Count a failed sign-in for ``address``."""
        with self._lock:
            self._failures.setdefault(address, deque(maxlen=MAX_FAILURES * 2)).append(
                time.monotonic()
            )

    def take_token(self, given: str) -> bool:
        """Whether ``given`` is the one-time token; it works once, then never again."""
        with self._lock:
            token, self._token = self._token, None
            fresh = time.monotonic() < self._token_until
            if token is not None and fresh and hmac.compare_digest(token, given):
                return True
            self._token = token  # a wrong guess does not burn the real token
            return False

    def start(self, role: str, name: str, key: Any) -> tuple[str, Principal]:
        """A new session; returns its cookie value and its principal."""
        sid = secrets.token_urlsafe(32)
        principal = Principal(role, name, key, secrets.token_urlsafe(32))
        with self._lock:
            self._sessions[sid] = _Session(principal, time.monotonic() + self._session_seconds)
        return sid, principal

    def session(self, sid: str | None) -> Principal | None:
        """The principal of a live session cookie, or ``None``."""
        if not sid:
            return None
        with self._lock:
            found = self._sessions.get(sid)
            if found is None:
                return None
            if found.expires <= time.monotonic():
                del self._sessions[sid]
                return None
            return found.principal

    def end(self, sid: str | None) -> None:
        """Sign a session out."""
        with self._lock:
            self._sessions.pop(sid or "", None)


def principal_of_key(key: Any) -> Principal:
    """A bearer request's principal: the key's role, ``key`` for a gateway key."""
    return Principal(key.role or ROLE_KEY, key.name, key, None)


def still_valid(principal: Principal, keys: list[Any], now: dt.datetime) -> bool:
    """Whether the key a session was made with is still active (the token's always is)."""
    if principal.key is None:
        return True
    for key in keys:
        if key.digest == principal.key.digest:
            return bool(key.state(now) == "active")
    return False


__all__ = ["Auth", "GatewayKeyError", "Principal", "principal_of_key", "still_valid"]
