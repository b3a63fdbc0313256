"""Who is calling: the one place that turns a request's headers into its budget identity.

Today the caller's own provider credentials (``x-api-key`` or
``Authorization``) are forwarded as they came, and the caller names itself
with ``x-ledger-agent``, ``x-ledger-session`` and ``x-ledger-tags``. Gateway
keys (``lk_…``) will be resolved here too: a key fixes the agent and tags,
names itself, and has the gateway's own provider key forwarded instead of the
caller's, so everything downstream of ``resolve_caller`` stays as it is.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ledger.core.proxy_config import ProxySettings

CREDENTIAL_HEADERS = ("x-api-key", "authorization")
LEDGER_HEADER_PREFIX = "x-ledger-"
_TEXT_MAX = 256
_TAG_RE = re.compile(r"^[A-Za-z0-9._:/@-]{1,64}$")
_TAGS_MAX = 16


class CallerRefusedError(Exception):
    """The request names itself in a way the gateway cannot accept."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Caller:
    """A request's budget identity and the credentials to forward upstream."""

    agent: str | None
    session: str | None
    tags: tuple[str, ...]
    key_name: str | None
    credentials: dict[str, str]


def _text(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if len(value) > _TEXT_MAX or not value.isprintable():
        raise CallerRefusedError(400, f"{name}: at most {_TEXT_MAX} printable characters")
    return value


def _tags(headers: Mapping[str, str]) -> tuple[str, ...]:
    raw = headers.get("x-ledger-tags")
    if raw is None:
        return ()
    tags = tuple(tag.strip() for tag in raw.split(",") if tag.strip())
    if len(tags) > _TAGS_MAX or not all(_TAG_RE.fullmatch(tag) for tag in tags):
        raise CallerRefusedError(
            400, f"x-ledger-tags: up to {_TAGS_MAX} comma-separated tags of [A-Za-z0-9._:/@-]"
        )
    return tags


def resolve_caller(headers: Mapping[str, str], settings: ProxySettings) -> Caller:
    """The caller of a request, from its (lower-case) headers.

    Raises:
        CallerRefusedError: 401 when ``proxy.require_keys`` is set (no gateway
            key can be checked yet, so none is accepted); 400 for a malformed
            ``x-ledger-*`` header.
    """
    if settings.require_keys:
        raise CallerRefusedError(
            401, "this gateway requires a gateway key (proxy.require_keys), and none was accepted"
        )
    credentials = {name: headers[name] for name in CREDENTIAL_HEADERS if name in headers}
    return Caller(
        agent=_text(headers, "x-ledger-agent"),
        session=_text(headers, "x-ledger-session"),
        tags=_tags(headers),
        key_name=None,
        credentials=credentials,
    )
