"""Who is calling: the one place that turns a request's headers into its budget identity.

Without a gateway key the caller's own provider credentials (``x-api-key``,
``Authorization``, or Gemini's ``x-goog-api-key``) are forwarded as they came,
and the caller names itself with ``x-ledger-agent``, ``x-ledger-session`` and
``x-ledger-tags``. A request presenting a gateway key (``lk_…``, in any
credential header) is scoped by the key: its agent and tags are the key's (a
request cannot claim others), the key names the call for budgets, and the
gateway's own provider key (``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` /
``GEMINI_API_KEY``) is forwarded instead, so agents never hold it.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ledger.core.gateway_keys import GatewayKey
from ledger.core.proxy_config import ProxySettings

CREDENTIAL_HEADERS = ("x-api-key", "authorization", "x-goog-api-key")
LEDGER_HEADER_PREFIX = "x-ledger-"
_TEXT_MAX = 256
_TAG_RE = re.compile(r"^[A-Za-z0-9._:/@-]{1,64}$")
_TAGS_MAX = 16
GATEWAY_KEY_PREFIX = "lk_"
PROVIDER_KEY_VARIABLES = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "google": "GEMINI_API_KEY",
}


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


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The gateway key a request presents (``lk_…`` as an API key header, or ``Bearer lk_…``)."""
    for name in ("x-api-key", "x-goog-api-key"):
        direct = headers.get(name, "").strip()
        if direct.startswith(GATEWAY_KEY_PREFIX):
            return direct
    scheme, _, token = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip().startswith(GATEWAY_KEY_PREFIX):
        return token.strip()
    return None


def provider_credentials(
    provider: str, environ: Mapping[str, str], variable: str | None = None
) -> dict[str, str]:
    """The gateway's own credentials for ``provider``, from its environment.

    ``variable`` names the environment variable holding the key (an
    OpenAI-compatible provider's ``key_env``); by default the provider's own.

    Raises:
        CallerRefusedError: 503 when the environment has no key for the provider.
    """
    variable = variable or PROVIDER_KEY_VARIABLES.get(provider)
    secret = environ.get(variable, "").strip() if variable else ""
    if not secret:
        raise CallerRefusedError(
            503, f"the gateway has no {variable or provider + ' key'} to call {provider} with"
        )
    if provider == "anthropic":
        return {"x-api-key": secret}
    if provider == "google":
        return {"x-goog-api-key": secret}
    return {"authorization": f"Bearer {secret}"}


def _keyed(headers: Mapping[str, str], key: GatewayKey, credentials: dict[str, str]) -> Caller:
    claimed = _text(headers, "x-ledger-agent")
    if claimed is not None and key.agent is not None and claimed != key.agent:
        raise CallerRefusedError(
            403, f"gateway key {key.name!r} is for agent {key.agent!r}, not {claimed!r}"
        )
    tags = _tags(headers)
    foreign = [tag for tag in tags if tag not in key.tags]
    if foreign:
        raise CallerRefusedError(
            403, f"gateway key {key.name!r} does not carry the tag(s) {', '.join(foreign)}"
        )
    return Caller(
        agent=key.agent if key.agent is not None else claimed,
        session=_text(headers, "x-ledger-session"),
        tags=key.tags,
        key_name=key.name,
        credentials=credentials,
    )


def resolve_caller(
    headers: Mapping[str, str],
    settings: ProxySettings,
    key: GatewayKey | None = None,
    credentials: dict[str, str] | None = None,
) -> Caller:
    """The caller of a request, from its (lower-case) headers and the key it presented.

    ``key`` is the resolved gateway key the request presented, and
    ``credentials`` the gateway's own provider credentials to use with it.

    Raises:
        CallerRefusedError: 401 when ``proxy.require_keys`` is set and no key
            was presented; 403 for a claim the key does not allow; 400 for a
            malformed ``x-ledger-*`` header.
    """
    if key is not None:
        return _keyed(headers, key, credentials or {})
    if settings.require_keys:
        raise CallerRefusedError(
            401,
            "this gateway requires a gateway key (proxy.require_keys): present one as "
            "x-api-key or Authorization: Bearer lk_...",
        )
    credentials = {name: headers[name] for name in CREDENTIAL_HEADERS if name in headers}
    return Caller(
        agent=_text(headers, "x-ledger-agent"),
        session=_text(headers, "x-ledger-session"),
        tags=_tags(headers),
        key_name=None,
        credentials=credentials,
    )
