"""The ``/bedrock``, ``/vertex`` and ``/azure`` routes: model calls the gateway signs itself.

Each cloud call is gated as a first-party one is (the estimate's verdict
before anything is sent, a refusal in the cloud's own error shape, the record
once), and goes upstream with the gateway's own cloud credentials
(``ledger.edges.cloudauth``). So these routes are served only when gateway
keys are required (``proxy.require_keys = true``): a caller presents its
gateway key as ``Authorization: Bearer``, ``x-api-key`` or ``api-key``, and
never holds a cloud credential.
"""

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio
import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ledger.core.clients import client_of
from ledger.core.ids import checked_id
from ledger.edges.cloudauth import BedrockSigner, CloudCredentialError, VertexTokens, azure_headers
from ledger.errors import ConfigError, GatewayKeyError, LedgerError, UsageError
from ledger.gateway.caller import CallerRefusedError, presented_key, resolve_caller
from ledger.gateway.exchange import Exchange
from ledger.gateway.framed import FramedExchange
from ledger.gateway.relay import client_headers, halt_message, upstream_headers, verdict_headers
from ledger.providers import RequestRefused, UsageReader, bedrock, error_body, vertex
from ledger.providers.azure import azure_route, estimate_azure
from ledger.providers.credentials import GATEWAY_KEY_PREFIX, Credential
from ledger.providers.limits import limited_body
from ledger.providers.outgoing import Outgoing, bounded_request
from ledger.providers.routes import Route
from ledger.providers.session import session_from_user_id
from ledger.runtime import Runtime
from ledger.services.gateway_keys import resolve_gateway_key

if TYPE_CHECKING:
    from ledger.gateway.host import GatewayHost

PREFIXES = ("/bedrock/", "/vertex/", "/azure/")
# Azure's reasoning deployments (gpt-5, o-series) refuse max_tokens, as OpenAI's models do.
_CHAT_FIELD = "max_completion_tokens"
# A caller's credentials and its own SigV4 parts: a client that signed (an AWS SDK with
# its own session) must neither pass its session token on nor clash with the gateway's.
_CALLER_CREDENTIALS = frozenset({
    "api-key", "x-api-key", "authorization", "x-goog-api-key",
    "x-amz-date", "x-amz-security-token", "x-amz-content-sha256",
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Call:
    """A cloud request, understood: whose, which kind, where it goes."""

    provider: str
    kind: str  # messages, converse, chat_completions, responses, generate_content, free
    path: str  # the path after the cloud's prefix, as it goes upstream
    found: Any  # the cloud's own route


def error_response(
    provider: str, status: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An error in the cloud's own shape: Bedrock's, Google's, or OpenAI's (Azure)."""
    extra = dict(headers or {})
    if provider == "bedrock":
        extra["x-amzn-errortype"] = bedrock.ERROR_TYPES.get(status, "InternalServerException")
        return JSONResponse(bedrock.error_body(message), status_code=status, headers=extra)
    shape = "google" if provider == "vertex" else "openai"
    kind = {400: "invalid_request_error", 401: "authentication_error", 402: "budget_exceeded"}
    body = error_body(shape, kind.get(status, "api_error"), message, status)
    return JSONResponse(body, status_code=status, headers=extra)


def _sent_path(request: Request) -> str:
    """The request's path as the client sent it, still escaped (the ASGI ``raw_path``)."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes) and raw:
        return raw.decode("latin-1").partition("?")[0]
    return quote(request.url.path)


def _understood(method: str, path: str, sent: str) -> _Call | None:
    cloud, _, rest = path.removeprefix("/").partition("/")
    rest = f"/{rest}"
    if cloud == "bedrock":
        # Read as sent: a model id may hold an escaped "/" (an inference-profile ARN).
        sent_rest = "/" + sent.removeprefix("/").partition("/")[2]
        found_b = bedrock.bedrock_route(method, sent_rest)
        if found_b is None:
            return None
        return _Call("bedrock", found_b.kind, bedrock.upstream_path(sent_rest), found_b)
    if cloud == "vertex":
        found_v = vertex.vertex_route(method, rest)
        return None if found_v is None else _Call("vertex", found_v.kind, rest, found_v)
    found_a = azure_route(method, rest)
    return None if found_a is None else _Call("azure", found_a.kind, rest, found_a)


# The cloud routes' credential row: the gateway signs (SigV4, a Google token, Azure's
# api-key) after the verdict, so nothing of the caller's is forwarded.
_SIGNED_BY_GATEWAY = Credential(variable=None, header="authorization")


class CloudRoutes:
    """The cloud route families, over the gateway's committer, client and body reader."""

    def __init__(
        self,
        gateway: "GatewayHost",
        streaming: type[StreamingResponse],
        passing: Callable[[httpx.Response], AsyncIterator[bytes]],
        too_large: type[Exception],
    ) -> None:
        # The app's own streaming response, raw relay and body-limit error.
        self._streaming, self._passing, self._too_large = streaming, passing, too_large
        self.gateway = gateway
        self.settings = gateway.settings
        self.environ = gateway.committer.environ
        self._bedrock: BedrockSigner | None = None
        self._vertex: VertexTokens | None = None

    async def dispatch(self, request: Request) -> Response:
        """Answer a request under ``/bedrock``, ``/vertex`` or ``/azure``."""
        path = request.url.path
        provider = path.removeprefix("/").partition("/")[0]
        call = _understood(request.method, path, _sent_path(request))
        if "websocket" in request.headers.get("upgrade", "").lower():
            # Codex tries a WebSocket first: refused at once, it falls back to HTTP.
            message = f"ledger: {path} is gated over HTTP only; WebSocket upgrades are refused"
            return error_response(provider, 426, message)
        if call is None:
            message = (
                f"ledger: {request.method} {path} is not served by this gateway "
                f"(only the {provider} model calls it can account for)"
            )
            return error_response(provider, 404, message)
        if not self.settings.require_keys:
            return error_response(
                provider, 401,
                f"ledger: the /{provider} routes sign with the gateway's own cloud credentials, "
                "so they are served only with gateway keys (proxy.require_keys = true)",
            )  # fmt: skip
        try:
            caller = await self._caller(request)
            body = await self.gateway._body(request)  # noqa: SLF001 - the gateway's own limit
        except CallerRefusedError as exc:
            return error_response(provider, exc.status, f"ledger: {exc}")
        except self._too_large:
            limit = self.settings.max_request_bytes
            message = f"ledger: the request body is over {limit} bytes; it was not sent"
            return error_response(provider, 413, message)
        if call.kind == "free":
            return await self._send(request, call, caller, body, None, {})
        return await self._gated(request, call, caller, body)

    async def _caller(self, request: Request) -> Any:
        headers = request.headers
        secret = presented_key(headers, list(request.query_params.multi_items()))
        direct = headers.get("api-key", "").strip()
        if secret is None and direct.startswith(GATEWAY_KEY_PREFIX):
            secret = direct
        if secret is None:
            raise CallerRefusedError(
                401,
                "this gateway requires a gateway key (proxy.require_keys): present one as "
                "Authorization: Bearer lk_..., x-api-key or api-key",
            )
        runtime = Runtime(self.gateway.committer.home, self.environ)
        try:
            key = await anyio.to_thread.run_sync(resolve_gateway_key, runtime, secret)
        except GatewayKeyError as exc:
            raise CallerRefusedError(401, str(exc)) from exc
        except LedgerError as exc:
            raise CallerRefusedError(503, f"gateway keys cannot be read: {exc}") from exc
        # The cloud's own signature is attached later; no caller credential goes upstream.
        return resolve_caller(headers, self.settings, _SIGNED_BY_GATEWAY, key, {})

    # ------------------------------------------------------------------ upstreams

    def _region(self) -> str:
        region = self.settings.bedrock_region or self.environ.get("AWS_REGION", "").strip()
        if not region:
            raise CloudCredentialError(
                "no Bedrock region: set proxy.bedrock.region (or AWS_REGION for the gateway)"
            )
        return region

    def _url(self, request: Request, call: _Call) -> str:
        query = request.url.query
        tail = call.path + (f"?{query}" if query else "")
        upstreams = self.settings.upstreams
        if call.provider == "bedrock":
            if call.found.control:
                base = (
                    upstreams.get("bedrock_control")
                    or f"https://bedrock.{self._region()}.amazonaws.com"
                )
            else:
                base = (
                    upstreams.get("bedrock")
                    or f"https://bedrock-runtime.{self._region()}.amazonaws.com"
                )
            return base + tail
        if call.provider == "vertex":
            return (upstreams.get("vertex") or vertex.upstream_base(call.found.location)) + tail
        if self.settings.azure_endpoint is None:
            raise CloudCredentialError("no Azure endpoint: set proxy.azure.endpoint")
        return self.settings.azure_endpoint + tail

    def _credentials(self, method: str, url: str, body: bytes, provider: str) -> dict[str, str]:
        """The gateway's own credentials for one upstream request (blocking: may refresh)."""
        if provider == "bedrock":
            if self._bedrock is None:
                self._bedrock = BedrockSigner(self._region(), self.environ)
            return self._bedrock.headers(method, url, body, "bedrock")
        if provider == "vertex":
            if self._vertex is None:
                self._vertex = VertexTokens()
            return self._vertex.headers()
        return azure_headers(self.environ)

    async def _send(
        self, request: Request, call: _Call, caller: Any, body: bytes,
        exchange: Exchange | None, headers: dict[str, str],
    ) -> Response:  # fmt: skip
        """Sign and send the request; pass the answer on (recorded first when gated)."""
        try:
            url = self._url(request, call)
            signed = await anyio.to_thread.run_sync(
                self._credentials, request.method, url, body, call.provider
            )
        except (CloudCredentialError, ConfigError) as exc:
            if exchange is not None:
                await exchange.record(None)
            return error_response(call.provider, 503, f"ledger: {exc}; the request was not sent")
        kept = [
            (name, value)
            for name, value in upstream_headers(request.headers.items(), caller)
            if name not in _CALLER_CREDENTIALS
        ]
        kept.extend(signed.items())
        gateway = self.gateway
        outgoing = gateway.client.build_request(request.method, url, headers=kept, content=body)
        try:
            response = await gateway.client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            if exchange is not None:
                await exchange.record(None)
            message = f"ledger: the upstream could not be reached ({type(exc).__name__}: {exc})"
            return error_response(call.provider, 502, message, headers)
        passed = {**client_headers(response), **headers}
        if exchange is None:
            return self._streaming(
                self._passing(response), status_code=response.status_code, headers=passed
            )
        content_type = response.headers.get("content-type", "")
        # Gemini on Vertex streams without alt=sse as one JSON array: passed on as it comes.
        exchange.json_array = (
            call.kind == "generate_content"
            and call.found.streamed
            and response.is_success
            and "json" in content_type
        )
        if content_type.startswith(("text/event-stream", bedrock.EVENT_STREAM)) or (
            exchange.json_array
        ):
            assert gateway.pumps is not None  # noqa: S101 - set by the app's lifespan
            relay = exchange.relay_stream(response, gateway.pumps, self.settings.drain_seconds)
            return self._streaming(relay, status_code=response.status_code, headers=passed)
        return await gateway._whole(response, exchange, call.provider, passed)  # noqa: SLF001

    # ------------------------------------------------------------------ gated calls

    def _prepared(self, call: _Call, body: bytes, headers: list[tuple[str, str]]) -> Outgoing:
        """The estimate, and the body bounded as it assumed (limits, server tools, usage)."""
        default = self.settings.default_max_output_tokens
        if call.provider == "bedrock":
            estimate = bedrock.estimate_bedrock(
                call.found, body, default_output_limit=default, headers=headers
            )
        elif call.provider == "vertex":
            estimate = vertex.estimate_vertex(
                call.found, body, default_output_limit=default, headers=headers
            )
        else:
            estimate = estimate_azure(
                call.found, body, self.settings.azure_deployments, default_output_limit=default
            )
        if call.kind == "converse":  # Converse has no server tools; its limit is its own
            if not estimate.limit_given:
                body = bedrock.limited_converse_body(estimate.document, estimate.output_limit)
            return Outgoing(estimate, body, searches=0, fee_micros=0, added_usage=False)
        return bounded_request(
            Route(call.provider, call.kind), estimate, body,  # type: ignore[arg-type]
            server_tool_max_uses=self.settings.server_tool_max_uses,
            chat_field=_CHAT_FIELD,
        )  # fmt: skip

    def _limited(self, call: _Call, document: dict[str, Any], tokens: int) -> bytes:
        if call.kind == "converse":
            return bedrock.limited_converse_body(document, tokens)
        return limited_body(call.kind, document, tokens, chat_field=_CHAT_FIELD)

    def _reader(self, call: _Call) -> Any:
        if call.provider == "bedrock":
            return (
                bedrock.ConverseReader()
                if call.kind == "converse"
                else bedrock.InvokeStreamReader()
            )
        # Claude on Vertex: the Anthropic response's own key, as on Bedrock.
        provider = "anthropic" if call.kind == "messages" else call.provider
        return UsageReader.for_route(Route(provider, call.kind))  # type: ignore[arg-type]

    async def _gated(self, request: Request, call: _Call, caller: Any, body: bytes) -> Response:
        provider = call.provider
        try:
            prepared = self._prepared(call, body, list(request.headers.items()))
        except RequestRefused as exc:
            return error_response(provider, 400, f"ledger: {exc}; the request was not sent")
        estimate, body = prepared.estimate, prepared.body
        cycle_id = caller.session
        source = "x-ledger-session"
        if cycle_id is None and estimate.metadata_user_id is not None:
            cycle_id = session_from_user_id(estimate.metadata_user_id)
            source = "metadata.user_id"
        try:
            checked_id(cycle_id, source)
        except UsageError as exc:
            return error_response(provider, 400, f"ledger: {exc}; the request was not sent")
        client = client_of(request.headers.get("user-agent"))
        decided = await self.gateway._decide(  # noqa: SLF001
            provider, estimate, cycle_id, caller, prepared, client
        )
        if isinstance(decided, Response):
            return _reshaped(decided, provider)
        document = decided.document
        headers = verdict_headers(document)
        if not decided.admits:
            return error_response(provider, 402, halt_message(document), headers)
        clamped = document.get("clamped_output_tokens")
        if isinstance(clamped, int):
            limit = clamped // estimate.choices
            body = self._limited(call, estimate.document, limit)
            headers["x-ledger-clamped"] = str(limit)
        kind: Callable[..., Exchange] = FramedExchange if provider == "bedrock" else Exchange
        exchange = kind(
            self.gateway.committer, provider, estimate.model, document, cycle_id,
            self._reader(call), self.gateway.log,
        )  # fmt: skip
        exchange.scope = {
            "agent": caller.agent, "tags": list(caller.tags) or None,
            "gateway_key": caller.key_name,
        }  # fmt: skip
        exchange.hide_usage_chunk = prepared.added_usage
        return await self._send(request, call, caller, body, exchange, headers)


def _reshaped(response: Response, provider: str) -> Response:
    """A refusal the gateway's decision made (in the OpenAI shape), in the cloud's shape."""
    try:
        found = json.loads(bytes(response.body))
        message = str(found["error"]["message"])
    except (ValueError, KeyError, TypeError):
        message = "ledger: the request was refused; it was not sent"
    kept = {name: value for name, value in response.headers.items() if name.startswith("x-ledger-")}
    return error_response(provider, response.status_code, message, kept)
