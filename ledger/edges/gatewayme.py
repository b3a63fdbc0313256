"""Asking a gateway for a key's own figures (``GET /v1/ledger/me``), for a home-less laptop.

The standard library's HTTP client keeps a hook's start cheap; TLS is verified
with the system's trust store (``SSL_CERT_FILE`` names another, for a gateway
with a private CA). The key goes only in the ``Authorization`` header, never in
a URL or a message.
"""

import json
import urllib.error
import urllib.request
from typing import Any

from ledger.errors import GatewayKeyError, GatewayUnreachableError

ME_PATH = "/v1/ledger/me"
_MAX_BYTES = 1 << 20


def _error_text(raw: bytes) -> str:
    try:
        document = json.loads(raw)
    except ValueError:
        return raw[:200].decode("utf-8", "replace").strip()
    found = document.get("error") if isinstance(document, dict) else None
    if isinstance(found, dict):
        found = found.get("message")
    return str(found)[:200] if found else ""


def ask_me(gateway: str, secret: str, timeout: float) -> dict[str, Any]:
    """The document the gateway at ``gateway`` answers for the key ``secret``.

    Raises:
        GatewayKeyError: the gateway refused the key (401, 403).
        GatewayUnreachableError: no answer within ``timeout`` seconds, a TLS
            failure, another status, or a body that is not a JSON object.
    """
    if not gateway.startswith(("http://", "https://")):
        raise GatewayUnreachableError(f"the gateway {gateway!r} is not an http(s) URL")
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked by the caller
        gateway.rstrip("/") + ME_PATH,
        headers={"authorization": f"Bearer {secret}", "accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310
            raw = answer.read(_MAX_BYTES)
    except urllib.error.HTTPError as exc:
        said = _error_text(exc.read(_MAX_BYTES))
        if exc.code in (401, 403):  # the statuses that refuse a key
            raise GatewayKeyError(f"the gateway refused the key ({exc.code}: {said})") from exc
        raise GatewayUnreachableError(
            f"the gateway {gateway} answered {exc.code}" + (f": {said}" if said else "")
        ) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise GatewayUnreachableError(f"the gateway {gateway} cannot be reached: {reason}") from exc
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise GatewayUnreachableError(f"the gateway {gateway} answered no JSON") from exc
    if not isinstance(document, dict):
        raise GatewayUnreachableError(f"the gateway {gateway} answered no JSON object")
    return document
