"""The gateway's web application: gated model calls, free endpoints, and nothing else.

``POST /v1/messages`` (Anthropic) and ``POST /v1/chat/completions`` and
``POST /v1/responses`` (OpenAI) are gated: the request's estimate gets a
verdict before anything is sent, a halt is answered 402 in the provider's own
error shape, and an admitted call is forwarded and recorded once. ``GET
/v1/models`` and ``POST /v1/messages/count_tokens`` cost nothing and are
forwarded as they are, as are the paths an operator lists in
``proxy.passthrough``; every other path is refused (404).
"""

import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import TYPE_CHECKING, Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route as WebRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from ledger.core.clients import client_of
from ledger.core.ids import checked_id
from ledger.core.proxy_config import ProxySettings
from ledger.core.verdict import Verdict
from ledger.errors import UsageError
from ledger.gateway.caller import (
    CallerRefusedError,
)
from ledger.gateway.clouds import PREFIXES as CLOUD_PREFIXES
from ledger.gateway.clouds import CloudRoutes
from ledger.gateway.committer import Committer
from ledger.gateway.exchange import Exchange
from ledger.gateway.me import PATH as ME_PATH
from ledger.gateway.me import me_endpoint
from ledger.gateway.relay import (
    client_headers,
    error_response,
    halt_message,
    shape_for,
    upstream_headers,
    verdict_headers,
)
from ledger.gateway.routing import identify, upstream_provider, upstream_url
from ledger.providers import RequestRefused, UsageReader, compatible_route, route
from ledger.providers.limits import limited_body
from ledger.providers.outgoing import Outgoing, outgoing_request
from ledger.providers.session import session_from_user_id
from ledger.runtime import Runtime
from ledger.services.gate.request_verdict import RequestVerdict, request_verdict

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

Log = Callable[[str], None]


class BodyTooLargeError(Exception):
    """The request body is larger than ``proxy.max_request_bytes``."""


class _RecordingStreamingResponse(StreamingResponse):
    """A streaming response whose body is always closed, so its call is always recorded.

    Starlette stops iterating a body whose client went away without closing
    it; closing it here runs the body's own accounting at once.
    """

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        finally:
            closer = getattr(self.body_iterator, "aclose", None)
            if closer is not None:
                with anyio.CancelScope(shield=True):
                    await closer()


class Gateway:
    """The request handlers, over one committer and one upstream client."""

    def __init__(self, settings: ProxySettings, committer: Committer, log: Log) -> None:
        self.settings = settings
        self.committer = committer
        self.log = log
        # The tasks that read streams from the upstream, living as long as the app.
        self.pumps: TaskGroup | None = None
        timeout = settings.upstream_timeout_seconds or None
        limit = settings.max_upstream_connections
        limits = httpx.Limits(max_connections=limit, max_keepalive_connections=limit)
        # A request's headers and body go out as two writes: without TCP_NODELAY,
        # Nagle's algorithm and the upstream's delayed ACK add ~40 ms to each.
        transport = httpx.AsyncHTTPTransport(
            limits=limits, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        )
        # One client carries every caller's calls: a cookie an upstream sets
        # for one of them (a CDN's, say) must never go out with another's, so
        # the client keeps none. Each caller still receives its own Set-Cookie.
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout), transport=transport, follow_redirects=False,
            cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
        )  # fmt: skip
        # The /bedrock, /vertex and /azure routes, signed with the gateway's cloud credentials.
        self.clouds = CloudRoutes(self, _RecordingStreamingResponse, _passing, BodyTooLargeError)

    # ------------------------------------------------------------------ entry

    async def dispatch(self, request: Request) -> Response:
        """Answer any request: gated, forwarded as is, or refused."""
        path = request.url.path
        if path.startswith(CLOUD_PREFIXES):
            return await self.clouds.dispatch(request)
        found = route(request.method, path) or compatible_route(
            request.method, path, self.settings.providers
        )
        if _websocket_to_gated_path(request):
            # Codex tries a WebSocket on /v1/responses first: refused at once, it
            # falls back to HTTP (a gated call is never carried over a WebSocket).
            return error_response(
                shape_for(path, request.headers) if found is None else found.provider,
                426,
                f"ledger: {path} is gated over HTTP only; WebSocket upgrades are refused",
            )
        provider = upstream_provider(found, path, request.headers, self.settings)
        if provider is None:
            return error_response(
                shape_for(path, request.headers),
                404,
                f"ledger: {request.method} {path} is not served by this gateway "
                "(only model calls it can account for, and the paths in proxy.passthrough)",
            )
        try:
            caller = await identify(request, provider, self.settings, self.committer)
            if found is not None and found.kind != "free":
                return await self._gated(request, found, caller)
            return await self._forward_free(request, provider, found, caller)
        except CallerRefusedError as exc:
            shape = found.provider if found else shape_for(path, request.headers)
            return error_response(shape, exc.status, f"ledger: {exc}")
        except BodyTooLargeError:
            shape = found.provider if found else shape_for(path, request.headers)
            limit = self.settings.max_request_bytes
            return error_response(
                shape, 413, f"ledger: the request body is over {limit} bytes; it was not sent"
            )

    async def _body(self, request: Request) -> bytes:
        limit = self.settings.max_request_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise BodyTooLargeError
        parts: list[bytes] = []
        size = 0
        async for part in request.stream():
            size += len(part)
            if size > limit:
                raise BodyTooLargeError
            parts.append(part)
        return b"".join(parts)

    # ------------------------------------------------------------------ free endpoints

    async def _forward_free(
        self, request: Request, provider: str, found: Any, caller: Any
    ) -> Response:
        body = await self._body(request)
        outgoing = self.client.build_request(
            request.method,
            upstream_url(self.settings, provider, found, request, caller),
            headers=upstream_headers(request.headers.items(), caller),
            content=body,
        )
        try:
            response = await self.client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            message = f"ledger: the upstream could not be reached ({type(exc).__name__}: {exc})"
            return error_response(provider, 502, message)
        return _RecordingStreamingResponse(
            _passing(response), status_code=response.status_code, headers=client_headers(response)
        )

    # ------------------------------------------------------------------ gated calls

    async def _gated(self, request: Request, found: Any, caller: Any) -> Response:
        provider = found.provider
        # OpenAI's newer limit field; OpenAI-compatible upstreams all know the older one.
        chat_field = "max_completion_tokens" if provider == "openai" else "max_tokens"
        body = await self._body(request)
        try:
            prepared = outgoing_request(
                found, body, request.headers.items(),
                default_output_limit=self.settings.default_max_output_tokens,
                server_tool_max_uses=self.settings.server_tool_max_uses, chat_field=chat_field,
            )  # fmt: skip
        except RequestRefused as exc:
            return error_response(provider, 400, f"ledger: {exc}; the request was not sent")
        estimate, body = prepared.estimate, prepared.body
        cycle_id = caller.session
        source = "x-ledger-session"
        if cycle_id is None and provider == "anthropic":
            # Claude Code's session part of metadata.user_id.
            cycle_id = session_from_user_id(estimate.metadata_user_id)
            source = "metadata.user_id"
        try:
            checked_id(cycle_id, source)
            checked_id(caller.agent, "x-ledger-agent")
        except UsageError as exc:
            return error_response(provider, 400, f"ledger: {exc}; the request was not sent")
        client = client_of(request.headers.get("user-agent"))
        decided = await self._decide(provider, estimate, cycle_id, caller, prepared, client)
        if isinstance(decided, Response):
            return decided
        document = decided.document
        headers = verdict_headers(document)
        if not decided.admits:
            return error_response(provider, 402, halt_message(document), headers)
        if decided.verdict is Verdict.WARN_90:
            self.log(f"warn-90 for {provider}/{estimate.model}: {document.get('usage_pct')} %")
        exchange = Exchange(
            self.committer, provider, estimate.model, document, cycle_id,
            UsageReader.for_route(found), self.log,
        )  # fmt: skip
        exchange.scope = {
            "agent": caller.agent, "tags": list(caller.tags) or None,
            "gateway_key": caller.key_name,
        }  # fmt: skip
        exchange.hide_usage_chunk = prepared.added_usage
        clamped = document.get("clamped_output_tokens")
        if isinstance(clamped, int):
            # Admitted at a lower output limit than asked: the upstream must enforce it.
            limit = clamped // estimate.choices
            try:
                body = limited_body(found.kind, estimate.document, limit, chat_field=chat_field)
            except RequestRefused as exc:
                await exchange.record(None)  # nothing was sent: the reservation settles at $0
                return error_response(provider, 400, f"ledger: {exc}; the request was not sent")
            headers["x-ledger-clamped"] = str(limit)
        outgoing = self.client.build_request(
            request.method,
            upstream_url(self.settings, provider, found, request, caller),
            headers=upstream_headers(request.headers.items(), caller),
            content=body,
        )
        try:
            response = await self.client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            await exchange.record(None)
            message = f"ledger: the upstream could not be reached ({type(exc).__name__}: {exc})"
            return error_response(provider, 502, message, headers)
        passed = {**client_headers(response), **headers}
        content_type = response.headers.get("content-type", "")
        # Gemini streams without alt=sse as one JSON array: passed on as it comes too.
        exchange.json_array = found.streamed and response.is_success and "json" in content_type
        if content_type.startswith("text/event-stream") or exchange.json_array:
            assert self.pumps is not None  # noqa: S101 - set by the app's lifespan
            relay = exchange.relay_stream(response, self.pumps, self.settings.drain_seconds)
            return _RecordingStreamingResponse(
                relay, status_code=response.status_code, headers=passed
            )
        return await self._whole(response, exchange, provider, passed)

    async def _whole(
        self, response: httpx.Response, exchange: Exchange, provider: str, headers: dict[str, str]
    ) -> Response:
        """A JSON (or error) answer: read, recorded, then handed over whole."""
        content = None
        try:
            content = await response.aread()
        except httpx.HTTPError as exc:
            self.log(f"upstream answer of {exchange.verdict_ref[:12]} broke: {exc}")
        finally:
            await response.aclose()
        if content is not None:
            exchange.reader.feed_json(content)
        if not await exchange.record(response.status_code):
            message = "ledger: the answer could not be recorded, so it is withheld"
            return error_response(provider, 502, message, headers)
        if content is None:
            return error_response(provider, 502, "ledger: the upstream answer broke off", headers)
        return Response(content, status_code=response.status_code, headers=headers)

    async def _decide(
        self,
        provider: str,
        estimate: Any,
        cycle_id: str | None,
        caller: Any,
        prepared: Outgoing,
        client: str,
    ) -> RequestVerdict | Response:
        # The clamp: a call that does not fit is sent with the most output that does.
        min_output = (
            self.settings.min_output_tokens * estimate.choices if self.settings.clamp else None
        )

        def job(runtime: Runtime) -> RequestVerdict:
            return request_verdict(
                runtime, estimate, searches=prepared.searches, fee_micros=prepared.fee_micros,
                cycle_id=cycle_id,
                agent=caller.agent,
                tags=list(caller.tags) or None, gateway_key=caller.key_name, forwarded=True,
                min_output_tokens=min_output, output_step=estimate.choices, client=client,
            )  # fmt: skip

        try:
            return await self.committer.run(job)
        except UsageError as exc:
            return error_response(provider, 400, f"ledger: {exc}; the request was not sent")
        except Exception as exc:  # noqa: BLE001 - no decision could be made: fail closed
            # The configuration is unusable, or a bug: nothing is sent either way.
            document = {"verdict": "halt-uncertainty", "uncertainty_reason": "counter_inconsistent"}
            message = f"ledger: halt-uncertainty: {exc}; the request was not sent"
            return error_response(provider, 402, message, verdict_headers(document))


def _websocket_to_gated_path(request: Request) -> bool:
    """Whether the request asks to upgrade to a WebSocket on a path whose calls are gated."""
    if "websocket" not in request.headers.get("upgrade", "").lower():
        return False
    gated = route("POST", request.url.path)
    return gated is not None and gated.is_model_call


async def _passing(response: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    finally:
        with anyio.CancelScope(shield=True):
            await response.aclose()


def build_app(gateway: Gateway) -> Starlette:
    """The ASGI application: every method and path goes to ``gateway.dispatch``."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            async with anyio.create_task_group() as pumps:
                gateway.pumps = pumps
                yield
        finally:
            await gateway.client.aclose()

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    me = me_endpoint(gateway.committer.home, gateway.committer.environ)
    routes = [
        WebRoute(ME_PATH, me, methods=["GET"]),
        WebRoute("/{path:path}", gateway.dispatch, methods=methods),
    ]
    counting = Middleware(_CountingRequests, committer=gateway.committer)
    return Starlette(routes=routes, lifespan=lifespan, middleware=[counting])


class _CountingRequests:
    """Keeps ``committer.requests`` at the number of HTTP requests being answered.

    A request counts until its last byte is sent, a stream's included: the
    committer runs a job on the event loop's thread only while its request is
    the only one, so a decision never holds up another request's bytes.
    """

    def __init__(self, app: ASGIApp, committer: Committer) -> None:
        self.app = app
        self.committer = committer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.committer.requests += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.committer.requests -= 1
