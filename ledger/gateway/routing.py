"""Where a request goes, and with whose key: its upstream, its caller, its upstream URL.

The upstream is decided first, from the route alone (``GET /v1/models``, which
both Anthropic and OpenAI serve, by whether the request speaks Anthropic's
protocol: ``anthropic-version``). The credential then follows that upstream
(``ledger.providers.credentials``), so no header can send one provider's key
to another's upstream.
"""

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

import anyio
from starlette.requests import Request

from ledger.core.proxy_config import ProxySettings
from ledger.errors import GatewayKeyError, LedgerError
from ledger.gateway.caller import (
    Caller,
    CallerRefusedError,
    credential_for,
    gateway_credentials,
    presented_key,
    resolve_caller,
)
from ledger.gateway.committer import Committer
from ledger.gateway.relay import shape_for
from ledger.providers import Route
from ledger.providers.credentials import forwarded_query
from ledger.runtime import Runtime
from ledger.services.gateway_keys import resolve_gateway_key

# What an OpenAI-compatible provider's url (the SDK's base_url) is followed by.
COMPATIBLE_ENDPOINTS = {"chat_completions": "/chat/completions", "responses": "/responses"}


def upstream_provider(
    found: Route | None, path: str, headers: Mapping[str, str], settings: ProxySettings
) -> str | None:
    """The provider whose upstream serves the request; ``None``: the path is not served."""
    if found is not None:
        if path == "/v1/models" and "anthropic-version" not in headers:
            return "openai"
        return found.provider
    if path in settings.passthrough:
        return shape_for(path, headers)
    return None


async def identify(
    request: Request, provider: str, settings: ProxySettings, committer: Committer
) -> Caller:
    """The request's caller, with the credentials for ``provider``'s upstream.

    A presented gateway key is checked first.

    Raises:
        CallerRefusedError: 401 for a refused key, 403 for a claim it does not
            allow, 503 when the key file cannot be read or the gateway has no
            key for the provider.
    """
    credential = credential_for(provider, settings)
    secret = presented_key(request.headers, _query(request))
    if secret is None:
        return resolve_caller(request.headers, settings, credential)
    runtime = Runtime(committer.home, committer.environ)
    try:
        key = await anyio.to_thread.run_sync(resolve_gateway_key, runtime, secret)
    except GatewayKeyError as exc:
        raise CallerRefusedError(401, str(exc)) from exc
    except LedgerError as exc:  # an unreadable key file: refuse, never pass through
        raise CallerRefusedError(503, f"gateway keys cannot be read: {exc}") from exc
    attached = gateway_credentials(provider, credential, committer.environ)
    return resolve_caller(request.headers, settings, credential, key, attached)


def upstream_url(
    settings: ProxySettings, provider: str, found: Route | None, request: Request, caller: Any
) -> str:
    """The URL the request goes to upstream, with only the key its provider may take.

    An OpenAI-compatible provider's ``url`` is its SDK's ``base_url``
    (version path included): the gateway adds only ``/chat/completions`` or
    ``/responses``.
    """
    credential = credential_for(provider, settings)
    pairs = forwarded_query(_query(request), credential, own_key=caller.key_name is None)
    query = urlencode(pairs) if pairs != _query(request) else request.url.query
    compatible = settings.providers.get(provider)
    if compatible is not None and found is not None:
        base, path = compatible.url, COMPATIBLE_ENDPOINTS[found.kind]
    else:
        base, path = settings.upstreams[provider], request.url.path
    return f"{base}{path}" + (f"?{query}" if query else "")


def resolved_upstreams(settings: ProxySettings) -> dict[str, str]:
    """Each provider's upstream as calls reach it (printed when the gateway starts)."""
    found = dict(settings.upstreams)
    for name, compatible in settings.providers.items():
        found[name] = ", ".join(f"{compatible.url}{end}" for end in COMPATIBLE_ENDPOINTS.values())
    return found


def _query(request: Request) -> list[tuple[str, str]]:
    return parse_qsl(request.url.query, keep_blank_values=True)
