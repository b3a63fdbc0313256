"""The console's Starlette application: sign-in, the eight pages, their JSON twins, the feed."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ledger.console import charts, live, views
from ledger.console.auth import COOKIE, ROLE_KEY, Auth, Principal
from ledger.console.verification import Verifier
from ledger.console.web import (
    Refused,
    SecurityHeaders,
    blocking,
    check_csrf,
    client_address,
    failure,
    refusal,
    who,
)
from ledger.core.units import micros_to_usd
from ledger.errors import GatewayKeyError, LedgerError

HERE = Path(__file__).parent
PAGE_PATHS = {
    "overview": "/console/", "live": "/console/live", "spend": "/console/spend",
    "calls": "/console/calls", "keys": "/console/keys", "alerts": "/console/alerts",
    "integrity": "/console/integrity", "me": "/console/me",
}  # fmt: skip


def _usd(micros: Any) -> str:
    return "unknown" if micros is None else f"${micros_to_usd(int(micros)):,.6f}"


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every caller-chosen value is text, never markup
    )
    env.filters["usd"] = _usd
    env.globals["bars"] = charts.bars
    env.globals["columns"] = charts.columns
    env.globals["pages"] = PAGE_PATHS
    return Jinja2Templates(env=env)


def _cookie(response: Response, request: Request, sid: str, seconds: int) -> None:
    secure = request.app.state.secure_cookies
    response.set_cookie(
        COOKIE, sid, max_age=seconds, path="/console", httponly=True, samesite="strict",
        secure=secure,
    )  # fmt: skip


async def _sign_in(request: Request, role: str, name: str, key: Any) -> Response:
    auth: Auth = request.app.state.auth
    sid, _ = auth.start(role, name, key)
    target = "/console/me" if role == ROLE_KEY else "/console/"
    response = RedirectResponse(target, status_code=303)
    _cookie(response, request, sid, auth.session_seconds)
    return response


def _login_form(request: Request, detail: str | None, status: int) -> Response:
    templates: Jinja2Templates = request.app.state.templates
    return templates.TemplateResponse(
        request, "login.html", {"detail": detail, "csrf": ""}, status_code=status
    )


async def login_get(request: Request) -> Response:
    """``GET /console/login[?token=…]``: the one-time token signs in as admin, once."""
    token = request.query_params.get("token")
    if token is None:
        return _login_form(request, None, 200)
    auth: Auth = request.app.state.auth
    address = client_address(request)
    if auth.limited(address):
        return _login_form(request, "too many failed sign-ins; wait a minute", 429)
    if not auth.take_token(token):
        auth.failed(address)
        return _login_form(request, "this sign-in link is used, expired or wrong", 401)
    return await _sign_in(request, "admin", "token", None)


async def login_post(request: Request) -> Response:
    """``POST /console/login`` with form field ``key`` (a console or gateway key)."""
    from ledger.services.gateway_keys import resolve_console_key

    auth: Auth = request.app.state.auth
    address = client_address(request)
    if auth.limited(address):
        return _login_form(request, "too many failed sign-ins; wait a minute", 429)
    form = await request.form()
    given = form.get("key")
    try:
        if not isinstance(given, str):
            raise GatewayKeyError("give a key")
        key = await blocking(resolve_console_key, request.app.state.runtime(), given.strip())
    except GatewayKeyError as exc:
        auth.failed(address)
        return _login_form(request, f"sign-in refused: {exc}", 401)
    return await _sign_in(request, key.role or ROLE_KEY, key.name, key)


async def logout(request: Request) -> Response:
    """``POST /console/logout``: ends the session (CSRF token required)."""
    principal = who(request, api=False)
    await check_csrf(request, principal)
    request.app.state.auth.end(request.cookies.get(COOKIE))
    response = RedirectResponse("/console/login", status_code=303)
    response.delete_cookie(COOKIE, path="/console")
    return response


def _page(name: str) -> Callable[[Request], Any]:
    async def page(request: Request) -> Response:
        principal = who(request, api=False)
        handler = views.live_page if name == "live" else views.PAGES[name]
        document = await handler(request, principal)
        return _render(request, name, principal, document)

    return page


def _render(
    request: Request, name: str, principal: Principal, document: dict[str, Any],
    status: int = 200, **extra: Any,
) -> Response:  # fmt: skip
    templates: Jinja2Templates = request.app.state.templates
    return templates.TemplateResponse(
        request, f"{name}.html",
        {"doc": document, "me": principal, "csrf": principal.csrf or "", "page": name,
         "query": dict(request.query_params), **extra},
        status_code=status,
    )  # fmt: skip


def _api(name: str) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        principal = who(request, api=True)
        return JSONResponse(await views.PAGES[name](request, principal))

    return endpoint


async def _key_body(request: Request) -> dict[str, Any]:
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            raise Refused(400, f"the body must be JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise Refused(400, "the body must be a JSON object")
        return body
    form = await request.form()
    body = {k: v for k, v in form.items() if isinstance(v, str) and v and k != "csrf_token"}
    if "tags" in body:
        body["tags"] = [t.strip() for t in str(body["tags"]).split(",") if t.strip()]
    return body


def _issue(runtime: Any, body: dict[str, Any]) -> dict[str, Any]:
    from ledger.core.timefmt import parse_iso8601
    from ledger.errors import UsageError
    from ledger.services.gate.budget_views import key_name, tag_list
    from ledger.services.gate.call_args import text_arg
    from ledger.services.gateway_keys import issue_capped_key, issue_key

    unknown = set(body) - {"name", "role", "agent", "tags", "expires", "budget"}
    if unknown:
        raise UsageError(f"unknown field(s): {', '.join(sorted(unknown))}")
    name, role, tags = body.get("name"), body.get("role"), body.get("tags") or []
    budget = body.get("budget")
    if budget is not None and (not isinstance(budget, str) or role is not None):
        raise UsageError('budget: "NAME=USD" (a per = "key" budget), for a gateway key only')
    if not isinstance(name, str) or not isinstance(tags, list):
        raise UsageError("name must be a string and tags a list of strings")
    if role is not None and role not in ("admin", "viewer"):
        raise UsageError(f"role: {role!r} must be admin or viewer")
    until = None
    if body.get("expires"):
        try:
            until = parse_iso8601(str(body["expires"]))
        except ValueError as exc:
            raise UsageError(f"expires: {exc}") from exc
    checked = key_name(name)
    agent = text_arg(body["agent"] if isinstance(body.get("agent"), str) else None, "agent")
    key_tags = tag_list([str(t) for t in tags])
    if budget:
        key, secret = issue_capped_key(runtime, str(checked), budget, agent, key_tags, until)
    else:
        key, secret = issue_key(runtime, str(checked), agent, key_tags, until, role)
    return {**key.shown(runtime.clock.now()), "key": secret}


async def keys_issue(request: Request) -> Response:
    """``POST /console/api/keys`` (JSON) or the Keys page's form: 201 with the secret once."""
    principal = who(request, api=True)
    views.allow(principal, admin=True)
    await check_csrf(request, principal)
    body = await _key_body(request)
    try:
        issued = await blocking(_issue, request.app.state.runtime(), body)
    except LedgerError as exc:
        raise Refused(409 if "already issued" in str(exc) else 400, str(exc)) from exc
    if request.url.path.startswith("/console/api/"):
        return JSONResponse(issued, status_code=201)
    document = await views.keys(request, principal)
    return _render(request, "keys", principal, document, 201, issued=issued)


async def keys_revoke(request: Request) -> Response:
    """``POST /console/api/keys/{name}/revoke``: the key is refused from now on."""
    from ledger.services.gateway_keys import revoke_key

    principal = who(request, api=True)
    views.allow(principal, admin=True)
    await check_csrf(request, principal)
    try:
        shown = await blocking(revoke_key, request.app.state.runtime(), request.path_params["name"])
    except LedgerError as exc:
        status = 404 if "no gateway key named" in str(exc) else 409
        raise Refused(status, str(exc)) from exc
    if request.url.path.startswith("/console/api/"):
        return JSONResponse(shown)
    return RedirectResponse("/console/keys", status_code=303)


async def integrity_start(request: Request) -> Response:
    """``POST /console/api/integrity``: start a full verification in the background (202)."""
    principal = who(request, api=True)
    views.allow(principal, admin=True)
    await check_csrf(request, principal)
    started = request.app.state.verifier.start(request.app.state.runtime)
    if not request.url.path.startswith("/console/api/"):
        return RedirectResponse("/console/integrity", status_code=303)
    return JSONResponse({"started": started, **request.app.state.verifier.status()}, 202)


async def live_feed(request: Request) -> Response:
    """``GET /console/api/live``: one ``data:`` JSON object per sealed verdict or record."""
    principal = who(request, api=True)
    state = request.app.state
    start = await live.start_of_feed(state.runtime)
    return EventSourceResponse(
        live.feed(state.runtime, principal, start, state.signal),
        ping=int(live.KEEPALIVE_SECONDS),
    )


def _explain(runtime: Any, ref: str) -> dict[str, Any]:
    from ledger.services.views.explain import explain

    return dict(explain(runtime, ref).to_document())


def _proof(runtime: Any, ref: str) -> dict[str, Any]:
    from ledger.services.chain.proofs import prove_inclusion

    return dict(prove_inclusion(runtime, ref).to_document())


def _entry_view(read: Callable[[Any, str], dict[str, Any]]) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        principal = who(request, api=True)
        views.allow(principal)
        ref = request.path_params["ref"]
        if not (12 <= len(ref) <= 64 and all(c in "0123456789abcdef" for c in ref)):  # noqa: PLR2004
            raise Refused(400, "ref: 12 to 64 lowercase hex digits")
        try:
            return JSONResponse(await blocking(read, request.app.state.runtime(), ref))
        except LedgerError as exc:
            raise Refused(404, str(exc)) from exc

    return endpoint


def build_app(make_runtime: Callable[[], Any], auth: Auth, *, secure_cookies: bool) -> Starlette:
    """The console for the home ``make_runtime`` opens (a fresh runtime per request)."""
    routes: list[Any] = [
        Route("/console/login", login_get, methods=["GET"]),
        Route("/console/login", login_post, methods=["POST"]),
        Route("/console/logout", logout, methods=["POST"]),
        Route("/console/keys", keys_issue, methods=["POST"]),
        Route("/console/keys/{name}/revoke", keys_revoke, methods=["POST"]),
        Route("/console/integrity", integrity_start, methods=["POST"]),
        Route("/console/api/keys", keys_issue, methods=["POST"]),
        Route("/console/api/keys/{name}/revoke", keys_revoke, methods=["POST"]),
        Route("/console/api/integrity", integrity_start, methods=["POST"]),
        Route("/console/api/live", live_feed, methods=["GET"]),
        Route("/console/api/explain/{ref}", _entry_view(_explain), methods=["GET"]),
        Route("/console/api/proof/{ref}", _entry_view(_proof), methods=["GET"]),
        Mount("/console/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    for name, path in PAGE_PATHS.items():
        routes.append(Route(path, _page(name), methods=["GET"]))
        if name in views.PAGES:
            routes.append(Route(f"/console/api/{name}", _api(name), methods=["GET"]))
    routes.append(Route("/console", lambda _: RedirectResponse("/console/", 307)))
    app = Starlette(
        routes=routes,
        middleware=[Middleware(SecurityHeaders)],
        exception_handlers={HTTPException: refusal, LedgerError: failure},
    )
    app.state.runtime = make_runtime
    app.state.auth = auth
    app.state.verifier = Verifier()
    app.state.signal = live.ChainSignal(make_runtime)
    app.state.templates = _templates()
    app.state.secure_cookies = secure_cookies
    return app
