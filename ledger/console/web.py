"""What every console response shares: security headers, who is asking, and refusals."""

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ledger.console.auth import COOKIE, ROLE_KEY, Auth, Principal, principal_of_key, still_valid
from ledger.errors import GatewayKeyError

if TYPE_CHECKING:
    from starlette.templating import Jinja2Templates

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


class SecurityHeaders:
    """Adds the console's security headers to every response, errors included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the headers to its response's start."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message["headers"] = kept + HEADERS
            await send(message)

        await self.app(scope, receive, with_headers)


class Refused(HTTPException):
    """A request answered with an error status and one line saying why."""


def client_address(request: Request) -> str:
    """The address failed sign-ins are counted for."""
    return request.client.host if request.client else "unknown"


async def blocking(call: Callable[..., Any], *args: Any) -> Any:
    """Run a service call (file and lock I/O) off the event loop."""
    return await asyncio.to_thread(call, *args)


def who(request: Request, *, api: bool) -> Principal:
    """The signed-in caller, from the session cookie or (JSON endpoints) a bearer key.

    Raises:
        Refused: 401 with no usable credential, 429 after too many failures.
    """
    auth: Auth = request.app.state.auth
    runtime = request.app.state.runtime()
    header = request.headers.get("authorization", "")
    if api and header.lower().startswith("bearer "):
        address = client_address(request)
        if auth.limited(address):
            raise Refused(429, "too many failed sign-ins from this address; wait a minute")
        from ledger.services.gateway_keys import resolve_console_key

        try:
            return principal_of_key(resolve_console_key(runtime, header[7:].strip()))
        except GatewayKeyError as exc:
            auth.failed(address)
            raise Refused(401, str(exc)) from exc
    principal = auth.session(request.cookies.get(COOKIE))
    if principal is None:
        raise Refused(401, "sign in first (GET /console/login?token=... or POST /console/login)")
    if not still_valid(principal, runtime.gateway_keys.load(), runtime.clock.now()):
        auth.end(request.cookies.get(COOKIE))
        raise Refused(401, "the key this session was made with is revoked or expired")
    return principal


def allow(principal: Principal, *, admin: bool = False, own: bool = False) -> None:
    """Refuse (403) what this principal may not see or change.

    ``own``: the page is a key holder's own view (the only one a gateway key sees).
    """
    if principal.role == ROLE_KEY and not own:
        raise Refused(403, "a gateway key sees its own view only (/console/me)")
    if admin and principal.role != "admin":
        raise Refused(403, "only an admin console key may change keys")


async def check_csrf(request: Request, principal: Principal) -> None:
    """A cookie-authenticated POST must carry the session's CSRF token.

    Raises:
        Refused: 403 when it is missing or wrong.
    """
    if principal.csrf is None:  # a bearer request: no cookie, nothing to forge
        return
    given = request.headers.get("x-csrf-token")
    if given is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()
        value = form.get("csrf_token")
        given = value if isinstance(value, str) else None
    import hmac

    if not given or not hmac.compare_digest(given, principal.csrf):
        raise Refused(403, "missing or wrong CSRF token (X-CSRF-Token header or csrf_token field)")


def refusal(request: Request, exc: Exception) -> Response:
    """A refusal as JSON (``/console/api/``) or, for pages, a sign-in redirect or a line."""
    assert isinstance(exc, HTTPException)  # noqa: S101 - registered for HTTPException
    if request.url.path.startswith("/console/api/") or request.method != "GET":
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
    if exc.status_code == 401:  # noqa: PLR2004
        return RedirectResponse("/console/login", status_code=303)
    templates: Jinja2Templates = request.app.state.templates
    return templates.TemplateResponse(
        request, "error.html",
        {"status": exc.status_code, "detail": exc.detail, "csrf": "", "me": None},
        status_code=exc.status_code,
    )  # fmt: skip


def failure(request: Request, exc: Exception) -> Response:
    """A service error (a config or store problem) as 503 with its one line, never a traceback."""
    del request
    return JSONResponse({"error": str(exc)}, status_code=503)


Handler = Callable[[Request], Awaitable[Response]]


def now_text(runtime: Any) -> str:
    """The time as pages print it."""
    return str(runtime.clock.now().astimezone(dt.UTC).isoformat(timespec="seconds"))
