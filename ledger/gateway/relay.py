"""What crosses the gateway unchanged, and what does not: headers, bodies, error shapes."""

from collections.abc import Iterable, Mapping
from typing import Any

import httpx
from starlette.responses import JSONResponse

from ledger.core.halt_text import halt_message as halt_text
from ledger.gateway.caller import CREDENTIAL_HEADERS, LEDGER_HEADER_PREFIX, Caller
from ledger.providers import error_body

# RFC 9110 §7.6.1: connection-specific fields are never forwarded; host and the
# framing fields are the gateway's own on each side.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
# Set by the gateway's own server for its answer; the upstream's would be a second copy.
OWN_RESPONSE_HEADERS = frozenset({"date", "server", "content-encoding"})
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "budget_exceeded",
    404: "not_found_error",
    413: "request_too_large",
    426: "upgrade_required",
    502: "api_error",
}


def _connection_listed(headers: Mapping[str, str]) -> set[str]:
    listed = headers.get("connection", "")
    return {name.strip().lower() for name in listed.split(",") if name.strip()}


def upstream_headers(headers: Iterable[tuple[str, str]], caller: Caller) -> list[tuple[str, str]]:
    """The request headers to send upstream.

    Hop-by-hop and ``x-ledger-*`` headers stay here; the credentials are the
    caller's as ``resolve_caller`` chose them; the body is asked for
    uncompressed, so its usage can be read as it passes.
    """
    pairs = list(headers)
    listed = _connection_listed(dict(pairs))
    kept = [
        (name, value)
        for name, value in pairs
        if name not in HOP_BY_HOP
        and name not in listed
        and name not in CREDENTIAL_HEADERS
        and name != "accept-encoding"
        and not name.startswith(LEDGER_HEADER_PREFIX)
    ]
    kept.extend(caller.credentials.items())
    kept.append(("accept-encoding", "identity"))
    return kept


def client_headers(response: httpx.Response) -> dict[str, str]:
    """The upstream response's headers to pass back (framing is the gateway's own)."""
    listed = _connection_listed(response.headers)
    return {
        name: value
        for name, value in response.headers.items()
        if name not in HOP_BY_HOP and name not in listed and name not in OWN_RESPONSE_HEADERS
    }


def shape_for(path: str, headers: Mapping[str, str]) -> str:
    """Whose error shape a request gets when its route does not say."""
    if path.startswith("/v1beta/"):
        return "google"
    if "anthropic-version" in headers or path.startswith(("/v1/messages", "/v1/complete")):
        return "anthropic"
    return "openai"


def error_response(
    provider: str, status: int, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """An error in ``provider``'s own shape."""
    body = error_body(provider, ERROR_TYPES.get(status, "api_error"), message, status)
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def verdict_headers(document: Mapping[str, Any]) -> dict[str, str]:
    """``x-ledger-verdict``, ``x-ledger-verdict-ref`` and ``x-ledger-usd-remaining``."""
    remaining = document.get("usd_remaining")
    return {
        "x-ledger-verdict": str(document.get("verdict")),
        "x-ledger-verdict-ref": str(document.get("verdict_ref") or ""),
        "x-ledger-usd-remaining": "" if remaining is None else f"{remaining:.6f}",
    }


def halt_message(document: Mapping[str, Any]) -> str:
    """Why a request was not sent: the verdict, its reason and the deciding cap's figures."""
    why = document.get("recording_error")
    detail = f"; {why}" if why and why != document.get("diagnostic") else ""
    ref = document.get("verdict_ref")
    tail = f" (verdict {ref[:12]})" if isinstance(ref, str) and ref else ""
    return f"ledger: {halt_text(dict(document))}{detail}; the request was not sent{tail}"
