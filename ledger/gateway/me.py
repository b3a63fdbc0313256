"""``GET /v1/ledger/me``: a gateway key's own figures, with the key itself as the credential.

The same document as the console's *Me* page: the key's spend today, this week
and this month, every cap and budget that applies to it and what is left. It
reads derived state and the calls sealed since its last answer, off the event
loop; a missing, console, revoked or unknown key gets 401.
"""

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ledger.errors import GatewayKeyError, LedgerError
from ledger.gateway.caller import CallerRefusedError, presented_key
from ledger.runtime import Runtime

PATH = "/v1/ledger/me"


def me_endpoint(home: Path, environ: dict[str, str]) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint for the gateway of ``home`` (figures from the rollups)."""

    def figures(secret: str) -> dict[str, Any]:
        from ledger.services.gateway_keys import resolve_gateway_key
        from ledger.services.views.me import key_figures

        runtime = Runtime(home, environ)
        return key_figures(runtime, resolve_gateway_key(runtime, secret))

    async def endpoint(request: Request) -> Response:
        try:
            secret = presented_key(request.headers, list(request.query_params.multi_items()))
        except CallerRefusedError as exc:
            return JSONResponse({"error": str(exc)}, status_code=401)
        if secret is None:
            return JSONResponse({"error": "present your gateway key (lk_...)"}, status_code=401)
        try:
            document = await anyio.to_thread.run_sync(figures, secret)
        except GatewayKeyError as exc:
            return JSONResponse({"error": str(exc)}, status_code=401)
        except LedgerError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        return JSONResponse(document)

    return endpoint


__all__ = ["PATH", "me_endpoint"]
