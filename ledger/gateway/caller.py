"""Who is calling: the one place that turns a request's headers into its budget identity.

Which key crosses to the upstream is the route's alone: the credential row of
the provider whose upstream the route goes to (``ledger.providers.credentials``).
Without a gateway key the caller's own key is forwarded, but only from the
headers (and, for Gemini, the ``?key=``) that provider's clients use; the
caller names itself with ``x-ledger-agent``, ``x-ledger-session`` and
``x-ledger-tags``. A request presenting a gateway key (``lk_…``, in any
credential header or ``?key=``) is scoped by the key: its agent and tags are
the key's (a claim of another is refused), the key names the call for
budgets, and the gateway's own key for the route's provider
(``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` / ``GEMINI_API_KEY``, or a
compatible provider's ``key_env``) is attached instead, so agents never hold
it. A gateway key itself never crosses.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ledger.core.gateway_keys import GatewayKey
from ledger.core.proxy_config import ProxySettings
from ledger.providers.credentials import (
    CREDENTIAL_HEADERS,
    CREDENTIALS,
    Credential,
    compatible_credential,
    presented_keys,
)

__all__ = ["CREDENTIAL_HEADERS", "Caller", "CallerRefusedError", "resolve_caller"]

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


def presented_key(headers: Mapping[str, str], query: list[tuple[str, str]]) -> str | None:
    """The gateway key a request presents, in any header or ``?key=``; ``None`` for none.

    Raises:
        CallerRefusedError: 401 when it presents two different gateway keys.
    """
    found = presented_keys(headers, query)
    if len(found) > 1:
        raise CallerRefusedError(401, "the request presents more than one gateway key")
    return next(iter(found), None)


def credential_for(provider: str, settings: ProxySettings) -> Credential:
    """The credential row of the upstream ``provider`` (built in, or OpenAI-compatible)."""
    compatible = settings.providers.get(provider)
    if compatible is not None:
        return compatible_credential(compatible.key_env)
    return CREDENTIALS[provider]


def gateway_credentials(
    provider: str, credential: Credential, environ: Mapping[str, str]
) -> dict[str, str]:
    """The gateway's own key for ``provider``'s upstream, as that upstream takes it.

    Raises:
        CallerRefusedError: 503 when the environment has no key for the provider.
    """
    if credential.variable is None:
        return {}  # an upstream that takes no key (a local vLLM or Ollama)
    secret = environ.get(credential.variable, "").strip()
    if not secret:
        raise CallerRefusedError(
            503, f"the gateway has no {credential.variable} to call {provider} with"
        )
    return credential.attached(secret)


def _keyed(headers: Mapping[str, str], key: GatewayKey, credentials: dict[str, str]) -> Caller:
    claimed = _text(headers, "x-ledger-agent")
    if claimed is not None and claimed != key.bound_agent:
        raise CallerRefusedError(
            403, f"gateway key {key.name!r} is for agent {key.bound_agent!r}, not {claimed!r}"
        )
    tags = _tags(headers)
    foreign = [tag for tag in tags if tag not in key.tags]
    if foreign:
        raise CallerRefusedError(
            403, f"gateway key {key.name!r} does not carry the tag(s) {', '.join(foreign)}"
        )
    return Caller(
        agent=key.bound_agent,
        session=_text(headers, "x-ledger-session"),
        tags=key.tags,
        key_name=key.name,
        credentials=credentials,
    )


def resolve_caller(
    headers: Mapping[str, str],
    settings: ProxySettings,
    credential: Credential,
    key: GatewayKey | None = None,
    attached: dict[str, str] | None = None,
) -> Caller:
    """The caller of a request, from its (lower-case) headers and the key it presented.

    ``credential`` is the row of the route's upstream; ``key`` the resolved
    gateway key the request presented, and ``attached`` the gateway's own
    credentials to send with it.

    Raises:
        CallerRefusedError: 401 when ``proxy.require_keys`` is set and no key
            was presented; 403 for a claim the key does not allow; 400 for a
            malformed ``x-ledger-*`` header.
    """
    if key is not None:
        return _keyed(headers, key, attached or {})
    if settings.require_keys:
        raise CallerRefusedError(
            401,
            "this gateway requires a gateway key (proxy.require_keys): present one as "
            "x-api-key, Authorization: Bearer, x-goog-api-key or ?key=lk_...",
        )
    own = {name: headers[name] for name in credential.accepts if name in headers}
    return Caller(
        agent=_text(headers, "x-ledger-agent"),
        session=_text(headers, "x-ledger-session"),
        tags=_tags(headers),
        key_name=None,
        credentials=own,
    )
